"""The three-way merge of two machines' memories against the last synced base, by memory id.

Never a text merge: each memory is a record, and each field is merged on its own. A field only
one side changed takes that side's value. When both sides changed a field differently:

- ``text``: the newer text wins (later ``textChangedAt``, then later activity); the other text is
  kept as a memory of its own in the trash (``deleteReason`` ``sync-conflict``), restorable with
  ``memself restore``. Its id comes from the memory's id and the text, so merging the same
  conflict again (a sync killed half way, the other machine) finds it already there.
- ``lastSeen``: the later one. It marks the last activity, and decay counts from it; the earlier
  one would decay a memory that was just used on the other machine.
- ``confidence``, ``deprecated``, ``gainDay``, ``gainToday``: taken together from the side whose
  ``lastSeen`` is later. Every step that changes confidence (a recall's reward, a reinforce, the
  daily decay) sets ``lastSeen`` to its time, so that side holds the last step. A maximum would
  undo a decay; a sum would count the shared history twice.
- ``firstSeen``, ``createdAt``: the earlier one.
- any other field (scope, requests, counts): the side with the later activity.

Ties are broken by the records' bytes, so every machine merging the same three states gets the
same result, whatever the order of syncs.

A memory deleted on one side and edited (its text, group, scope, requests: not just a reward or
a decay) on the other is kept, with the edit, and reported. A memory only on one side is added.
The trash merges as a set of entries: an entry is dropped when one side dropped it (restored or
purged), added when one side added it; an entry whose memory is live again is dropped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memself.sync.canonical import Record, Snapshot, trash_key
from memself.timeutil import iso

CONFLICT_REASON = "sync-conflict"
# Fields that bookkeeping changes (rewards, decay, counts) and that never count as an edit.
_BOOKKEEPING = {"confidence", "lastSeen", "gainDay", "gainToday", "deprecated"}
_BY_LAST_SEEN = ("confidence", "deprecated", "gainDay", "gainToday")
_MISSING: Any = object()


@dataclass
class MergeReport:
    added: list[str] = field(default_factory=list)  # ids new to this machine
    conflicts: list[tuple[str, str]] = field(default_factory=list)  # (id, id of the trashed text)
    kept_edited: list[str] = field(default_factory=list)  # deleted on one side, edited on the other
    removed: list[str] = field(default_factory=list)  # deleted elsewhere


def merge(base: Snapshot, local: Snapshot, remote: Snapshot, now: datetime) -> tuple[Snapshot, MergeReport]:
    report = MergeReport()
    out = Snapshot()
    conflict_trash: list[Record] = []
    for mem_id in sorted(set(base.memories) | set(local.memories) | set(remote.memories)):
        b, lo, r = base.memories.get(mem_id), local.memories.get(mem_id), remote.memories.get(mem_id)
        if lo is None and r is None:
            continue
        if lo is None or r is None:
            present = lo if lo is not None else r
            assert present is not None
            if b is None:
                out.memories[mem_id] = present
                if lo is None:
                    report.added.append(mem_id)
            elif _edited(b, present):
                out.memories[mem_id] = present
                report.kept_edited.append(mem_id)
            elif lo is not None:
                report.removed.append(mem_id)
            continue
        merged, loser = _merge_record(b, lo, r)
        out.memories[mem_id] = merged
        if loser is not None:
            trashed = _conflict_copy(mem_id, loser, now)
            conflict_trash.append(trashed)
            report.conflicts.append((mem_id, str(trashed["id"])))
    keys = set(base.trash) | set(local.trash) | set(remote.trash)
    for key in sorted(keys):
        in_l, in_r = key in local.trash, key in remote.trash
        if key in base.trash and not (in_l and in_r):
            continue
        out.trash[key] = local.trash[key] if in_l else remote.trash[key]
    held_ids = {str(r.get("id")) for r in out.trash.values()}
    for record in conflict_trash:
        if record["id"] not in held_ids:
            out.trash[trash_key(record)] = record
    out.trash = {k: v for k, v in out.trash.items() if str(v.get("id")) not in out.memories}
    return out, report


def _edited(before: Record, after: Record) -> bool:
    keys = (set(before) | set(after)) - _BOOKKEEPING
    return any(before.get(k, _MISSING) != after.get(k, _MISSING) for k in keys)


def _activity(record: Record) -> tuple[str, str]:
    return (str(record.get("lastSeen") or record.get("createdAt") or ""), _bytes(record))


def _bytes(record: Record) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def _merge_record(b: Record | None, lo: Record, r: Record) -> tuple[Record, Record | None]:
    """The merged record, and the losing side when both changed the text differently."""
    if lo == r:
        return lo, None
    base = b or {}
    # The side with the later lastSeen (ties: the bytes) carries confidence and the rest.
    newer = lo if _activity(lo) >= _activity(r) else r
    loser: Record | None = None
    text_side = lo if lo.get("text") != base.get("text") else r
    if lo.get("text") != r.get("text") and base.get("text") not in (lo.get("text"), r.get("text")):
        text_side, other = sorted(
            (lo, r), key=lambda x: (str(x.get("textChangedAt") or ""), *_activity(x)), reverse=True
        )
        loser = other
    merged: Record = {}
    for key in list(lo) + [k for k in r if k not in lo]:
        bv, lv, rv = base.get(key, _MISSING), lo.get(key, _MISSING), r.get(key, _MISSING)
        if lv == rv:
            value = lv
        elif lv == bv:
            value = rv
        elif rv == bv:
            value = lv
        elif key in ("text", "textChangedAt"):
            value = text_side.get(key, _MISSING)
        elif key == "lastSeen":
            value = max(str(lv if lv is not _MISSING else ""), str(rv if rv is not _MISSING else ""))
        elif key in ("firstSeen", "createdAt"):
            value = min((v for v in (lv, rv) if isinstance(v, str) and v), default=lv)
        elif key in _BY_LAST_SEEN:
            value = newer.get(key, _MISSING)
        else:
            value = newer.get(key, _MISSING)
        if value is not _MISSING:
            merged[key] = value
    return merged, loser


def _conflict_copy(mem_id: str, loser: Record, now: datetime) -> Record:
    digest = hashlib.sha256(f"{mem_id}\n{loser.get('text')}".encode()).digest()
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    number = int.from_bytes(digest[:12], "big")
    chars = []
    for _ in range(14):
        number, rest = divmod(number, 36)
        chars.append(alphabet[rest])
    new_id = f"mem-{''.join(chars[:8])}-{''.join(chars[8:])}"
    return {**loser, "id": new_id, "deletedAt": iso(now), "deleteReason": CONFLICT_REASON}
