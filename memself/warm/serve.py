"""The engine process as memself runs it: the engine (socket, lifecycle) serving the product's
service, with the page regenerated and the memories synced (``memself sync``) between connections once
writes settle."""

from __future__ import annotations

from memself.engine.server import run_engine
from memself.paths import DataPaths

SERVICE = "memself.warm.service:make_service"
# Long enough that a burst of writes (an import, a merge) regenerates the page once.
PAGE_DELAY_S = 10.0
# Writes settled this long before the engine starts a sync (``memself sync`` set up).
SYNC_DELAY_S = 30.0


def serve(paths: DataPaths, idle_minutes: float | None = None, lock_fd: int | None = None) -> int:
    """Serve ``paths`` until idle or stopped; the exit code."""
    from memself.page.refresh import PageRefresher
    from memself.sync.background import SyncAfterWrites

    page = PageRefresher(paths, PAGE_DELAY_S)
    synced = SyncAfterWrites(paths, SYNC_DELAY_S)
    return run_engine(paths, SERVICE, idle_minutes, lock_fd=lock_fd, idle_tasks=(page.tick, synced.tick))
