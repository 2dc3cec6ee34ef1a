"""The engine keeps memories.html fresh in the background, never on a write.

A write only changes the group files and the trash. The engine looks at their stamps on every
turn of its serve loop; once they have been still for ``delay_s`` after a change (a burst of
writes is one change), it regenerates the page in a separate, lower-priority process, so the
rendering neither holds the engine's interpreter nor competes with a prompt for the CPU. A page
older than the files when the engine starts counts as a change, so writes made while no engine
ran show up too. ``memself open`` and the MCP ``memory_list`` with ``open`` regenerate it
themselves, at once. The same run refreshes the summaries ``memself list`` reads (``listing``).

Run as ``python -m memself.page.refresh DATA_DIR`` for the regeneration itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import children
from memself.store.journal import file_stamp
from memself.store.settle import AfterWritesSettle, memory_stamps

# How far below its own priority the regeneration runs (a niceness increment).
NICE_INCREMENT = 10


def page_is_stale(paths: DataPaths) -> bool:
    """True when a memory file changed after the page was last written (or there is no page
    while there are memories)."""
    sources = [s for s in memory_stamps(paths) if s is not None]
    if not sources:
        return False
    try:
        page = file_stamp(paths.html)
    except OSError:
        page = None
    # A stamp is (inode, mtime ns, size).
    return page is None or max(s[1] for s in sources) > page[1]


class PageRefresher(AfterWritesSettle):
    """Regenerates the page once the memory files settle (``store.settle``); a page older than
    the files at the engine's start counts as a change."""

    def __init__(
        self, paths: DataPaths, delay_s: float, spawn: Callable[[DataPaths], Any] | None = None
    ) -> None:
        super().__init__(
            paths, delay_s, spawn or spawn_refresh, "page-refresh-failed", pending_at_start=page_is_stale
        )


def spawn_refresh(paths: DataPaths) -> Any:
    return children.popen_detached_child(
        python_command("memself.page.refresh", str(paths.root)), dict(os.environ)
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return 2
    paths = DataPaths(argv[0])
    try:
        os.nice(NICE_INCREMENT)
    except (AttributeError, OSError):
        pass
    try:
        from memself.page.listing import refresh_views  # only in the regeneration process

        refresh_views(paths, datetime.now(timezone.utc))
    except Exception as exc:  # a background job: the log is all anyone sees
        log(paths, "page-refresh-failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    log(paths, "page-refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
