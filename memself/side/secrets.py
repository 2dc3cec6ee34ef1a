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
from memself.errors import CorruptFile, InvalidInput, KeyEndpointMismatch, KeyFileInvalid
from memself.logs import log
from memself.paths import DataPaths

_SECRET_RE = re.compile(r"^[a-f0-9]{64}$")
# The endpoint the API key was entered for; the original reads only ``apiKey`` and ignores it.
BOUND_FIELD = "boundApiBase"
_COMPLETIONS = "/chat/completions"


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


def read_session_secret(paths: DataPaths) -> str | None:
    """The secret if the file holds a valid one, else ``None``; never creates or repairs it."""
    try:
        return _read_secret(paths.session_secret)
    except (OSError, CorruptFile):
        return None


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


class KeyFile:
    """What ``side-secret.json`` holds: ``state`` is "missing", "invalid" or "ok".

    ``bound_base`` is the endpoint the key was entered for; "" for a file in the original's
    format, which is bound to the endpoint configured when it is first used.
    """

    __slots__ = ("bound_base", "key", "problem", "state")

    def __init__(self, state: str, key: str = "", bound_base: str = "", problem: str = "") -> None:
        self.state = state
        self.key = key
        self.bound_base = bound_base
        self.problem = problem


def read_key_file(paths: DataPaths) -> KeyFile:
    """Read ``side-secret.json`` without ever raising; an unusable file says why in ``problem``.

    An empty key counts as not configured (what the original wrote on "skip"); a file that exists
    but cannot be used (unreadable, 0 bytes after a full disk, not JSON) is "invalid", so the hook
    can say the key is broken instead of quietly looking unconfigured.
    """
    try:
        raw = paths.side_secret.read_bytes()
    except FileNotFoundError:
        return KeyFile("missing")
    except OSError as exc:
        return KeyFile("invalid", problem=f"无法读取（{exc.strerror or type(exc).__name__}）")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return KeyFile("invalid", problem="不是合法的 JSON" if raw.strip() else "是空文件")
    if not isinstance(data, dict):
        return KeyFile("invalid", problem="不是 JSON 对象")
    key, base = data.get("apiKey"), data.get(BOUND_FIELD, "")
    if key is None or (isinstance(key, str) and not key.strip()):
        return KeyFile("missing")
    if not isinstance(key, str) or any(ch in key.strip() for ch in "\r\n\0"):
        return KeyFile("invalid", problem="apiKey 不是一行字符串")
    if not isinstance(base, str):
        return KeyFile("invalid", problem=f"{BOUND_FIELD} 不是字符串")
    return KeyFile("ok", key.strip(), base.strip())


def read_api_key(paths: DataPaths) -> str:
    """The side judge's API key from ``side-secret.json``, or ``""`` when unset or unusable."""
    found = read_key_file(paths)
    return found.key if found.state == "ok" else ""


def write_api_key(paths: DataPaths, api_key: str, base: str | None = None) -> None:
    """Store the API key bound to ``base``, the endpoint it was entered for (mode 600, atomic).

    ``apiKey`` keeps the original's name so the original plugin still reads the file. Without a
    base the key is bound at its first use. An empty key removes the file.
    """
    key = api_key.strip()
    if any(ch in key for ch in "\r\n\0"):
        raise InvalidInput("apiKey 不能包含换行或空字符")
    paths.ensure()
    if not key:
        with contextlib.suppress(FileNotFoundError):
            paths.side_secret.unlink()
        return
    data = {"apiKey": key}
    if base and base.strip():
        data[BOUND_FIELD] = base.strip()
    write_atomic(paths.side_secret, json.dumps(data, ensure_ascii=False, indent=2) + "\n",
                 mode=0o600)


def normalise_base(url: str) -> str:
    """Scheme, host, port and path of an endpoint, for comparing two spellings of one address.

    Case of scheme and host, a default port, a trailing slash and a trailing ``/chat/completions``
    (which the request adds anyway) do not make two bases differ; anything else does.
    """
    text = url.strip()
    from urllib.parse import urlsplit, urlunsplit  # only when two spellings differ

    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text.rstrip("/")
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return text.rstrip("/")
    port = port or {"http": 80, "https": 443}.get(scheme)
    path = parts.path.rstrip("/")
    if path.endswith(_COMPLETIONS):
        path = path[: -len(_COMPLETIONS)].rstrip("/")
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + (f"[{host}]" if ":" in host else host)
    netloc += f":{port}" if port else ""
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def same_base(first: str, second: str) -> bool:
    if first.strip() == second.strip():
        return True
    return normalise_base(first) == normalise_base(second)


def shown_base(url: str) -> str:
    """An endpoint fit for a log line or a message: any ``user:password@`` part is dropped."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        return url.strip()
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"


def key_state(found: KeyFile, configured_base: str) -> str:
    """"missing", "invalid", "mismatch" (bound to another endpoint), "unbound" or "ok"."""
    if found.state != "ok":
        return found.state
    if not found.bound_base:
        return "unbound"
    return "ok" if same_base(found.bound_base, configured_base) else "mismatch"


def key_for_endpoint(paths: DataPaths, configured_base: str) -> tuple[str, str]:
    """``(api_key, base)`` for a request to the configured endpoint, or an error; nothing is sent
    before this returns.

    The base returned is the one the key was entered for (equal to the configured one up to
    spelling), so an address that two URL parsers read differently cannot steer the key
    elsewhere. A key in the original's format is bound here, at its first use.
    """
    found = read_key_file(paths)
    if found.state == "missing":
        raise KeyFileInvalid(f"没有接口密钥（{paths.side_secret}）")
    if found.state == "invalid":
        raise KeyFileInvalid(f"接口密钥文件 {paths.side_secret} {found.problem}")
    base = configured_base.strip()
    if not base:
        raise KeyFileInvalid("config.json 没有 sideApiBase")
    if not found.bound_base:
        write_api_key(paths, found.key, base)
        log(paths, "side-key-bound", base=shown_base(base))
        return found.key, base
    if not same_base(found.bound_base, base):
        raise KeyEndpointMismatch(
            f"apiKey 是为 {shown_base(found.bound_base)} 录入的，而 config.json 的 sideApiBase 现在是 "
            f"{shown_base(base)}；为防密钥和对话被发往别处，没有发送任何请求。确认新地址可信后运行 "
            "memself key set 重新输入 apiKey")
    return found.key, found.bound_base
