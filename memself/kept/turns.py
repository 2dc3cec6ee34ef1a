"""Per-session files under ``kept/``: what the last turn was shown, and a pending notice.

Standard library only: the prompt hook takes the pending notice (one stat when there is none),
and the engine notes what a prompt was shown after the host got the answer. File names carry the
host and the sanitised session key, so one session never reads another's.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.paths import DataPaths
from memself.platform import files as platform_files
from memself.timeutil import iso

NOTICE_LIMIT = 5  # broken rules named in one notice


def kept_dir(paths: DataPaths) -> Path:
    return paths.root / "kept"


def ensure_kept_dir(paths: DataPaths) -> Path:
    paths.ensure()
    folder = kept_dir(paths)
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _name(prefix: str, host: str, session_key: str) -> str:
    return f"{prefix}-{host}-{session_key}.json"


def shown_path(paths: DataPaths, host: str, session_key: str) -> Path:
    return kept_dir(paths) / _name("shown", host, session_key)


def notice_path(paths: DataPaths, host: str, session_key: str) -> Path:
    return kept_dir(paths) / _name("notice", host, session_key)


def note_shown(
    paths: DataPaths, host: str, session_key: str, turn_id: str, ids: Sequence[str], now: datetime
) -> None:
    """The memories recalled into this session's latest prompt (only the latest turn is checked
    at Stop, so each prompt replaces the file)."""
    if not session_key:
        return
    ensure_kept_dir(paths)
    body = {"turn": turn_id, "ids": list(dict.fromkeys(ids)), "at": iso(now)}
    _write_unsynced(shown_path(paths, host, session_key), json.dumps(body) + "\n")


def take_shown(paths: DataPaths, host: str, session_key: str, turn_id: str = "") -> list[str]:
    """The ids the latest prompt was shown, once: a second Stop of the turn sees none, nor does
    a later turn's Stop when this one was interrupted (the host names its turns)."""
    data = _take(shown_path(paths, host, session_key))
    if isinstance(data, dict) and turn_id and data.get("turn") and data.get("turn") != turn_id:
        return []
    ids = data.get("ids") if isinstance(data, dict) else None
    return [i for i in ids if isinstance(i, str)][:200] if isinstance(ids, list) else []


def leave_notice(paths: DataPaths, host: str, session_key: str, rules: Sequence[tuple[str, str]]) -> None:
    """Broken rules (id, text) for this session's next prompt; added to any not yet shown."""
    if not session_key or not rules:
        return
    ensure_kept_dir(paths)
    path = notice_path(paths, host, session_key)
    found = _read(path)
    old = found.get("rules") if isinstance(found, dict) else None
    merged: dict[str, str] = {}
    for item in old if isinstance(old, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("text"), str):
            merged[item["id"]] = item["text"]
    for mem_id, text in rules:
        merged[mem_id] = text
    items = [{"id": k, "text": v} for k, v in list(merged.items())[-NOTICE_LIMIT:]]
    write_atomic(path, json.dumps({"rules": items}, ensure_ascii=False) + "\n", mode=0o600)


def take_notice(paths: DataPaths, host: str, session_key: str) -> list[str]:
    """The texts of the rules the previous answer broke, once; [] (one failed stat) when none."""
    if not session_key:
        return []
    data = _take(notice_path(paths, host, session_key))
    rules = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(rules, list):
        return []
    return [r["text"] for r in rules if isinstance(r, dict) and isinstance(r.get("text"), str)][:NOTICE_LIMIT]


def _write_unsynced(path: Path, text: str) -> None:
    """Whole or not at all (a rename), but without fsync: the engine writes this after every
    delivered recall, and a note lost in a crash only means one turn goes unchecked."""
    tmp = path.with_name(f".new-{os.getpid()}-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | platform_files.BINARY, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _take(path: Path) -> Any:
    """Read and remove: renamed first, so two hooks of one session never both take it."""
    claimed = path.with_name(f".taken-{os.getpid()}-{path.name}")
    try:
        os.rename(path, claimed)
    except OSError:
        return None
    try:
        return _read(claimed)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(claimed)


def _read(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.loads(handle.read(1 << 16))
    except (OSError, ValueError):
        return None
