"""Small builders shared by the store tests."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.records import Memory

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=timezone.utc)


def days(n: float) -> timedelta:
    return timedelta(days=n)


def make_store(root: Path | None = None) -> MemoryStore:
    paths = DataPaths(root) if root else DataPaths.default()
    paths.ensure()
    return MemoryStore(paths)


def write_records(store: MemoryStore, group: str, records: list[dict]) -> None:
    path = store.paths.group_file(group)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")


def record(
    mem_id: str,
    text: str,
    conf: float,
    group: str = "rule",
    last: datetime = T0,
    created: datetime | None = None,
    deprecated: bool = False,
    **extra: object,
) -> dict:
    from memself.timeutil import iso

    created = created or last - days(100)
    return {
        "id": mem_id,
        "text": text,
        "confidence": conf,
        "category": group,
        "evidence": "",
        "firstSeen": iso(created),
        "lastSeen": iso(last),
        "deprecated": deprecated,
        "createdAt": iso(created),
        **extra,
    }


def by_id(store: MemoryStore, mem_id: str) -> Memory:
    memory = store.get(mem_id)
    assert memory is not None, mem_id
    return memory


def open_paths() -> list[str]:
    """What this process holds open, where the system lists it (``/proc/self/fd``); nothing
    elsewhere."""
    folder = Path("/proc/self/fd")
    found = []
    for fd in folder.iterdir() if folder.is_dir() else []:
        try:
            found.append(os.readlink(fd))
        except OSError:
            continue
    return found
