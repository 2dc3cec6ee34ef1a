"""Local secrets of the side judge: the HMAC ``session-secret`` and the API key file.

Neither value ever leaves the machine: not through MCP, a log, a model request or the context.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

from memself.atomic import write_atomic
from memself.errors import CorruptFile, InvalidInput
from memself.paths import DataPaths

_SECRET_RE = re.compile(r"^[a-f0-9]{64}$")


def load_or_create_session_secret(paths: DataPaths) -> str:
    """The 64-hex local HMAC secret; created exclusively with mode 600 on first use (§4.2).

    Two hooks racing on the first use both end with the same secret: the loser of the exclusive
    create re-reads the winner's file. A file that exists but does not hold a valid secret is an
    error, never silently replaced, since that would orphan every pending sessionID.
    """
    target = paths.session_secret
    try:
        return _read_secret_waiting(target)
    except FileNotFoundError:
        pass
    paths.ensure()
    value = os.urandom(32).hex()  # what secrets.token_hex does, without its imports
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_secret_waiting(target)
    try:
        os.write(fd, (value + "\n").encode("ascii"))  # one write: readers see 0 or 65 bytes
        os.fsync(fd)
    finally:
        os.close(fd)
    return value


def _read_secret(target: Path) -> str:
    value = target.read_text(encoding="utf-8", errors="replace").strip()
    if not _SECRET_RE.match(value):
        raise CorruptFile(f"本地会话密钥 {target} 内容无效，需要 64 位小写十六进制")
    return value


def _read_secret_waiting(target: Path) -> str:
    # An empty file is another process's exclusive create in progress: give it a moment.
    for _ in range(50):
        if target.stat().st_size > 0:
            break
        time.sleep(0.01)
    return _read_secret(target)


def read_api_key(paths: DataPaths) -> str:
    """The side judge's API key from ``side-secret.json``, or ``""`` when unset or unreadable."""
    try:
        data = json.loads(paths.side_secret.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    key = data.get("apiKey") if isinstance(data, dict) else None
    return key.strip() if isinstance(key, str) else ""


def write_api_key(paths: DataPaths, api_key: str) -> None:
    """Store the API key (mode 600, atomic). An empty key removes the file."""
    key = api_key.strip()
    if any(ch in key for ch in "\r\n\0"):
        raise InvalidInput("apiKey 不能包含换行或空字符")
    paths.ensure()
    if not key:
        with contextlib.suppress(FileNotFoundError):
            paths.side_secret.unlink()
        return
    write_atomic(paths.side_secret, json.dumps({"apiKey": key}, ensure_ascii=False, indent=2) + "\n",
                 mode=0o600)
