"""The sync a session start begins, and the one the engine begins once writes settle: detached,
never waited for, never on a prompt's path.

The session start only checks that sync is set up and not run lately (two small file reads),
then spawns ``memself.sync.background ROOT`` in an isolated interpreter and returns; the child
fetches, merges and pushes, and a failure (offline) only goes to the log. Standard library only
at import: the hook process imports this module.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.store.settle import AfterWritesSettle
from memself.timeutil import parse_iso

# A session start syncs at most this often (another session starting soon after finds it done).
MIN_INTERVAL = timedelta(minutes=10)


def configured(paths: DataPaths) -> bool:
    return os.path.isdir(os.path.join(str(paths.sync_dir), "repo", ".git"))


def due(paths: DataPaths, now: datetime) -> bool:
    if not configured(paths):
        return False
    try:
        with open(os.path.join(str(paths.sync_dir), "state.json"), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return True
    if not isinstance(state, dict):
        return True
    times = [parse_iso(state.get(k)) for k in ("lastSync", "lastAttempt")]
    last = max((t for t in times if t is not None), default=None)
    return last is None or now - last >= MIN_INTERVAL


def start_if_due(paths: DataPaths, now: datetime, workspace: str = "") -> int | None:
    """Spawn the detached sync when it is due; its pid, or None. ``workspace`` (the session's
    repository root) is learnt by the child, so memories of that repository synced from another
    machine land in it (``memself.sync.workspaces``)."""
    if not due(paths, now):
        return None
    from memself import children
    from memself.platform import children as platform_children

    pid = platform_children.spawn_detached(
        python_command("memself.sync.background", str(paths.root), workspace), dict(os.environ)
    )
    children.track(pid)
    log(paths, "sync-background-started", pid=pid)
    return pid


class SyncAfterWrites(AfterWritesSettle):
    """The engine's idle task: once the memory files have been still for ``delay_s`` after a
    change, start a detached sync (one at a time; ``store.settle``). A sync that brings changes
    writes the files too, so one more sync follows; it finds nothing to do and writes nothing,
    which ends it. At the engine's start nothing is pending: a session start already began one."""

    def __init__(
        self, paths: DataPaths, delay_s: float, spawn: Callable[[DataPaths], Any] | None = None
    ) -> None:
        super().__init__(paths, delay_s, spawn or spawn_sync, "sync-background-failed", enabled=configured)


def spawn_sync(paths: DataPaths) -> Any:
    from memself.platform import children as platform_children

    return platform_children.popen_detached_child(
        python_command("memself.sync.background", str(paths.root)), dict(os.environ)
    )


def main(argv: list[str]) -> int:
    from memself.errors import MemselfError
    from memself.sync.run import sync
    from memself.sync.workspaces import WorkspaceMap

    paths = DataPaths(argv[0])
    try:
        if len(argv) > 1 and argv[1]:
            known = WorkspaceMap(paths)
            known.learn(argv[1])
            known.save()
        result = sync(paths, datetime.now(timezone.utc))
    except (MemselfError, OSError) as exc:
        log(paths, "sync-background-failed", error=str(exc))
        return 1
    log(paths, "sync-background-done", pushed=result.pushed, added=len(result.report.added))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
