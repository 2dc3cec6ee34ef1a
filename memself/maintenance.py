"""The daily maintenance, run by the first session start of the local day (shared across processes).

It decays idle memories once, clamps legacy confidences, purges old trash, clears crash
leftovers and finishes zombie judge jobs. Like the original it refuses to rewrite the group
files while one holds a quarantined line (the user sees why in ``list`` and ``doctor``), and
marks the day done only after everything is written, so a failed run is retried by the next
session without deducting twice (a deducted memory already carries a fresh ``lastSeen``).
Each file is replaced on its own: none of these changes moves a memory between files. A
session start runs it inline for a small store and detached for a large one
(``run_or_start_daily_maintenance``), so the hook never waits past its deadline for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memself import children
from memself.atomic import write_atomic
from memself.errors import CorruptFile, MemselfError
from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import children as platform_children
from memself.store.lock import LockHandle, write_lock
from memself.store.memory_store import (
    TRASH_KEEP_DAYS,
    MemoryStore,
    TrashFile,
    WriteSession,
    confidence,
    dedup_pairs,
    dedupkeys,
    render_lines,
)
from memself.store.records import GROUPS, Memory, sort_memories
from memself.timeutil import iso, local_day, parse_iso

# Up to this many bytes of group files the maintenance runs inside the session start that
# triggers it (quick, and the day's first rules are already decayed); above, in a process of its
# own that the session start waits for only briefly.
INLINE_BYTES = 4 * 1024 * 1024
# Recorded duplicate-sidecar pairs beyond the file's memories, per memory, past which the
# maintenance rebuilds the pairs from the memories it parsed (each stale pair only costs an add of
# that text a full parse, and space).
STALE_PAIRS = 0.25


@dataclass(frozen=True)
class MaintenanceResult:
    decayed: int
    newly_deprecated: int
    clamped: int
    trash_purged: int
    # An active memory without "applies when" requests: the day's background filler has work.
    views_waiting: bool = False


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


def run_or_start_daily_maintenance(
    paths: DataPaths, decay_days: int, now: datetime, wait_s: float, inline_bytes: int = INLINE_BYTES
) -> bool:
    """Today's maintenance for a session start: run here for a small store; for a large one,
    start it detached and wait at most ``wait_s`` for it. True when it is done (now or earlier)."""
    if ran_today(paths, now):
        return True
    if _group_bytes(paths) <= inline_bytes:
        run_daily_maintenance(paths, decay_days, now)
        return True
    pid = _spawn(paths, decay_days, now)
    waited = 0.0
    while waited < wait_s:
        if platform_children.reap(pid):
            return ran_today(paths, now)
        time.sleep(0.01)
        waited += 0.01
    children.track(pid)  # a warm engine reaps it; a hook process exits first and init does
    log(paths, "daily-maintenance-detached", pid=pid)
    return False


def _group_bytes(paths: DataPaths) -> int:
    total = 0
    for group in GROUPS:
        with contextlib.suppress(OSError):
            total += os.stat(paths.group_file(group)).st_size
    return total


def _spawn(paths: DataPaths, decay_days: int, now: datetime) -> int:
    """``memself.maintenance ROOT DAYS NOW`` in an isolated interpreter (``memself.launcher``) and
    its own session, stdio on /dev/null.

    ``os.posix_spawn`` keeps ``subprocess`` out of the hook process (like the judge's start),
    where the system has it."""
    env = dict(os.environ)
    argv = python_command("memself.maintenance", str(paths.root), str(decay_days), iso(now))
    return platform_children.spawn_detached(argv, env)


def main(argv: list[str]) -> int:
    """The detached run: errors go to the log, as they would in the session start."""
    import gc

    # A short run that parses and renders every memory once: the cyclic collector would walk
    # those objects again and again as they pile up, and the process ends with the run anyway.
    gc.disable()
    paths = DataPaths(argv[0])
    try:
        now = parse_iso(argv[2]) or datetime.now(timezone.utc)
        run_daily_maintenance(paths, int(argv[1]), now)
    except (MemselfError, OSError, ValueError) as exc:
        log(paths, "daily-maintenance-failed", error=str(exc))
        return 1
    return 0


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
    _start_views_fill(paths, result.views_waiting)
    return result


def _maintain(store: MemoryStore, lock: LockHandle, decay_days: int, now: datetime) -> MaintenanceResult:
    paths = store.paths
    decayed = deprecated = clamped = 0
    changed_groups: dict[str, bytes] = {}
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
        rendered = _render(group_file.memories)
        if dirty or session.lines(group).data != rendered:
            changed_groups[group] = rendered
    session.load_trash()
    trash = session.trash_file
    assert trash is not None
    purged = _purge_trash(session, trash, now)
    for group, rendered in changed_groups.items():
        group_file = groups[group]
        path = paths.group_file(group)
        session.check_still_ours([(path, group_file.stamp)])
        keys = dedupkeys.load(dedupkeys.sidecar_path(paths, group), group_file.stamp)
        if keys is not None and keys.stale_share(len(group_file.memories)) > STALE_PAIRS:
            # The file is parsed anyway: pairs of memories deleted or rewritten since go.
            keys = dedupkeys.for_pairs(dedup_pairs(group_file.memories), keys.size, keys.digests)
        write_atomic(path, rendered)
        _carry_dedup_keys(paths, group, keys)
    waiting = any(m.active and not m.appliesWhen for g in groups.values() for m in g.memories)
    return MaintenanceResult(decayed, deprecated, clamped, purged, waiting)


def _render(memories: list[Memory]) -> bytes:
    return render_lines(m.to_json() for m in sort_memories(memories))


def _carry_dedup_keys(paths: DataPaths, group: str, keys: dedupkeys.Sidecar | None) -> None:
    """Decay, clamping and re-sorting change no text: a sidecar that matched the file before
    holds the keys of the file just written (None: it did not, the next add rebuilds it)."""
    if keys is None:
        return
    try:
        dedupkeys.save_after_write(dedupkeys.sidecar_path(paths, group), paths.group_file(group), keys, 0)
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


def _start_views_fill(paths: DataPaths, waiting: bool) -> None:
    """The day's detached run of the "applies when" filler (``memself.views.background``), when
    a memory waits for requests or the filler has run before (a text may have changed since)."""
    from memself.views.background import start_background_fill
    from memself.views.state import state_path

    try:
        if waiting or state_path(paths).exists():
            start_background_fill(paths)
    except Exception as exc:
        log(paths, "views-fill-start-failed", error=str(exc))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
