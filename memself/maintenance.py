"""The daily maintenance, run by the first session start of the local day (shared across processes).

It decays idle memories once, clamps legacy confidences, purges old trash, clears crash
leftovers and finishes zombie judge jobs. Like the original it refuses to rewrite the group
files while one holds a quarantined line (the user sees why in ``list`` and ``doctor``), and
marks the day done only after everything is written, so a failed run is retried by the next
session without deducting twice (a deducted memory already carries a fresh ``lastSeen``).
Each file is replaced on its own: none of these changes moves a memory between files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from memself import confidence, dedupkeys
from memself.atomic import write_atomic
from memself.errors import CorruptFile
from memself.journal import file_stamp
from memself.lock import LockHandle, write_lock
from memself.logs import log
from memself.paths import DataPaths
from memself.records import GROUPS, Memory, dedup_key, sort_memories
from memself.store import TRASH_KEEP_DAYS, MemoryStore, TrashFile, WriteSession, render_lines
from memself.timeutil import iso, local_day, parse_iso


@dataclass(frozen=True)
class MaintenanceResult:
    decayed: int
    newly_deprecated: int
    clamped: int
    trash_purged: int


def ran_today(paths: DataPaths, now: datetime) -> bool:
    """Only the small state file is read when the day is already done."""
    try:
        state = json.loads(paths.decay_state.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        log(paths, "读取每日衰减状态失败", error=str(exc))
        return False
    return isinstance(state, dict) and state.get("lastRunDate") == local_day(now)


def run_daily_maintenance(paths: DataPaths, decay_days: int, now: datetime) -> MaintenanceResult | None:
    """Run today's maintenance once; None when it already ran today."""
    if ran_today(paths, now):
        return None
    store = MemoryStore(paths)
    with write_lock(paths) as lock:
        if ran_today(paths, now):
            return None
        store.prepare_write(deep=True)
        result = _maintain(store, lock, decay_days, now)
        write_atomic(
            paths.decay_state,
            json.dumps({"lastRunDate": local_day(now), "lastRunAt": iso(now)}, ensure_ascii=False) + "\n",
        )
    log(
        paths,
        "每日衰减完成",
        decayed=result.decayed,
        deprecated=result.newly_deprecated,
        clamped=result.clamped,
        trash_purged=result.trash_purged,
    )
    _cleanup_side_jobs(paths, now)
    return result


def _maintain(store: MemoryStore, lock: LockHandle, decay_days: int, now: datetime) -> MaintenanceResult:
    paths = store.paths
    decayed = deprecated = clamped = 0
    changed_groups = []
    session = WriteSession(store, lock)
    groups = {g: session.parsed(g) for g in GROUPS}
    for group, group_file in groups.items():
        if group_file.bad_lines:
            first = group_file.bad_lines[0]
            raise CorruptFile(
                f"{group}.jsonl 第 {first.line_no} 行无法读取（{first.reason}），每日维护未改动任何文件"
            )
    for group, group_file in groups.items():
        dirty = False
        for memory in group_file.memories:
            was_deprecated = memory.deprecated
            # The original's order: decay first, then clamp a legacy value above 1, so an idle
            # 1.15 ends at 1 (1.1 clamped), not at 0.95 (1 decayed).
            if not memory.deprecated:
                due = confidence.is_due(memory, now, decay_days)
                if due is None:
                    log(paths, "decay-skip-invalid-time", id=memory.id)
                elif due:
                    confidence.decay(memory, now)
                    decayed += 1
                    dirty = True
            if confidence.clamp_legacy(memory):
                clamped += 1
                dirty = True
            deprecated += int(memory.deprecated and not was_deprecated)
        # Writes change lines in place and append new ones: a file that is not exactly what a
        # full write gives (the original's order, every record complete) is written again here
        # (compaction), off every command's path.
        if dirty or session.lines(group).data != _render(group_file.memories):
            changed_groups.append(group)
    session.load_trash()
    trash = session.trash_file
    assert trash is not None
    purged = _purge_trash(session, trash, now)
    for group in changed_groups:
        group_file = groups[group]
        path = paths.group_file(group)
        session.check_still_ours([(path, group_file.stamp)])
        write_atomic(path, _render(group_file.memories))
        _write_dedup_keys(paths, group, group_file.memories)
    return MaintenanceResult(decayed, deprecated, clamped, purged)


def _render(memories: list[Memory]) -> bytes:
    return render_lines(m.to_json() for m in sort_memories(memories))


def _write_dedup_keys(paths: DataPaths, group: str, memories: list[Memory]) -> None:
    """A fresh sidecar for the file just written, so the next add need not parse it."""
    try:
        dedupkeys.save(
            dedupkeys.sidecar_path(paths, group),
            file_stamp(paths.group_file(group)),
            {dedupkeys.key_hash(dedup_key(m.text), m.workspace) for m in memories},
        )
    except OSError as exc:
        log(paths, "dedup-keys-write-failed", group=group, error=str(exc))


def _purge_trash(session: WriteSession, trash: TrashFile, now: datetime) -> int:
    limit = now - timedelta(days=TRASH_KEEP_DAYS)
    keep = [e for e in trash.entries if (parse_iso(e.deleted_at) or now) >= limit]
    if len(keep) != len(trash.entries):
        path = session.store.paths.trash
        session.check_still_ours([(path, trash.stamp)])
        # Quarantined trash lines are kept as they are, like in every other rewrite.
        write_atomic(path, render_lines((e.to_json() for e in keep), trash.bad_lines))
    return len(trash.entries) - len(keep)


def _cleanup_side_jobs(paths: DataPaths, now: datetime) -> None:
    # Zombie judge jobs are side state, not memories: their cleanup never fails the maintenance.
    from memself.judge.jobs import cleanup_zombies

    try:
        cleanup_zombies(paths, now)
    except Exception as exc:
        log(paths, "zombie-cleanup-failed", error=str(exc))
