"""What ``memself sync`` remembers between runs: the remote, the last sync, lines set aside."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.paths import DataPaths


def repo_dir(paths: DataPaths) -> Path:
    return paths.sync_dir / "repo"


def state_file(paths: DataPaths) -> Path:
    return paths.sync_dir / "state.json"


def lock_file(paths: DataPaths) -> Path:
    return paths.sync_dir / "sync.lock"


def quarantine_file(paths: DataPaths) -> Path:
    """Lines of the synced files the store would not read, kept byte for byte (``file`` + raw)."""
    return paths.sync_dir / "quarantine.jsonl"


def load(paths: DataPaths) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(state_file(paths).read_text("utf-8"))
        if isinstance(data, dict):
            return data
    return {}


def save(paths: DataPaths, **values: Any) -> None:
    data = load(paths)
    data.update(values)
    write_atomic(state_file(paths), json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def quarantine(paths: DataPaths, lines: list[tuple[str, bytes]]) -> int:
    """Append the lines not yet set aside; returns how many were new."""
    path = quarantine_file(paths)
    try:
        held = set(path.read_bytes().split(b"\n"))
    except FileNotFoundError:
        held = set()
    new = []
    for name, raw in lines:
        line = json.dumps({"file": name, "line": raw.decode("utf-8", "surrogateescape")}, ensure_ascii=True)
        encoded = line.encode("ascii")
        if encoded not in held:
            held.add(encoded)
            new.append(encoded + b"\n")
    if new:
        with open(path, "ab") as handle:
            handle.write(b"".join(new))
    return len(new)
