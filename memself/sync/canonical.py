"""The memories as they travel: three files in a canonical form, one record a line, sorted.

Group files hold their memories sorted by id, the trash its entries sorted by id and deletion
time; every line comes from the store's one encoder (``memself.store.recordlines``), so a synced
file is always one the original plugin reads. Records are compared in the form memself writes
them (read and written back once), so two machines holding the same memory hold the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from memself.store.memory_store import TrashEntry, parse_lines, parse_trash
from memself.store.recordlines import encode_record
from memself.store.records import GROUPS, Memory

Record = dict[str, Any]


@dataclass
class Snapshot:
    memories: dict[str, Record] = field(default_factory=dict)  # id -> record
    trash: dict[str, Record] = field(default_factory=dict)  # trash_key -> trash record
    bad: list[tuple[str, bytes]] = field(default_factory=list)  # (file, line as found)


def record_of(memory: Memory) -> Record:
    return json.loads(encode_record(memory.to_json()))


def trash_record(entry: TrashEntry) -> Record:
    return json.loads(encode_record(entry.to_json()))


def trash_key(record: Record) -> str:
    """A trash entry's identity: the same entry on two machines has the same key."""
    raw = json.dumps(
        [record.get("id"), record.get("deletedAt"), record.get("text")], ensure_ascii=False
    ).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def from_store(groups: dict[str, list[Memory]], trash: list[TrashEntry]) -> Snapshot:
    snap = Snapshot()
    for group in GROUPS:
        for memory in groups.get(group, []):
            _add(snap, f"{group}.jsonl", record_of(memory))
    for entry in trash:
        record = trash_record(entry)
        snap.trash.setdefault(trash_key(record), record)
    return snap


def from_files(files: dict[str, bytes]) -> Snapshot:
    """A snapshot of the synced files; lines the store would not read go to ``bad``."""
    snap = Snapshot()
    for group in GROUPS:
        name = f"{group}.jsonl"
        loaded = parse_lines(files.get(name, b""), group)
        snap.bad += [(name, b.raw) for b in loaded.bad_lines]
        for memory in loaded.memories:
            _add(snap, name, record_of(memory))
    trash = parse_trash(files.get("trash.jsonl", b""))
    snap.bad += [("trash.jsonl", b.raw) for b in trash.bad_lines]
    for entry in trash.entries:
        record = trash_record(entry)
        snap.trash.setdefault(trash_key(record), record)
    return snap


def _add(snap: Snapshot, name: str, record: Record) -> None:
    mem_id = str(record["id"])
    held = snap.memories.get(mem_id)
    if held is None:
        snap.memories[mem_id] = record
    elif held != record:
        # A second, different record under the same id (a hand edit): kept aside, not lost.
        snap.bad.append((name, encode_record(record).rstrip(b"\n")))


def to_files(snap: Snapshot) -> dict[str, bytes]:
    out = {f"{g}.jsonl": b"" for g in GROUPS}
    for mem_id in sorted(snap.memories):
        record = snap.memories[mem_id]
        name = f"{record['category']}.jsonl"
        out[name] += encode_record(dict(record))
    ordered = sorted(snap.trash.values(), key=lambda r: (str(r.get("id")), str(r.get("deletedAt"))))
    out["trash.jsonl"] = b"".join(encode_record(dict(r)) for r in ordered)
    return out


def to_store(snap: Snapshot) -> tuple[dict[str, list[Memory]], list[TrashEntry]]:
    groups: dict[str, list[Memory]] = {g: [] for g in GROUPS}
    for record in snap.memories.values():
        memory = Memory.from_json(record, str(record.get("category", "")))
        if memory is not None:
            groups[memory.category].append(memory)
    trash = parse_trash(to_files(Snapshot(trash=snap.trash))["trash.jsonl"]).entries
    return groups, trash
