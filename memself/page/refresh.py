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
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import children

Stamp = tuple[int, int, int] | None
# How far below its own priority the regeneration runs (a niceness increment).
NICE_INCREMENT = 10


def _stamp(path: Path) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def source_files(paths: DataPaths) -> list[Path]:
    """The files the page is made of."""
    return [paths.group_file("rule"), paths.group_file("project"), paths.trash]


def page_is_stale(paths: DataPaths) -> bool:
    """True when a source file changed after the page was last written (or there is no page
    while there are memories)."""
    sources = [s for s in (_stamp(p) for p in source_files(paths)) if s is not None]
    if not sources:
        return False
    page = _stamp(paths.html)
    return page is None or max(s[0] for s in sources) > page[0]


class PageRefresher:
    """Decides when to regenerate the page; ``tick`` is called with a monotonic clock.

    ``spawn`` starts the regeneration and returns something with ``poll()`` (a ``Popen``): one
    runs at a time, and a change seen while it runs is picked up by the next one.
    """

    def __init__(
        self,
        paths: DataPaths,
        delay_s: float,
        spawn: Callable[[DataPaths], subprocess.Popen[bytes]] | None = None,
    ) -> None:
        self.paths = paths
        self.delay_s = delay_s
        self._spawn = spawn or spawn_refresh
        self._seen: list[Stamp] | None = None
        self._changed_at: float | None = None
        self._running: subprocess.Popen[bytes] | None = None
        self.spawned = 0

    def tick(self, now: float) -> None:
        if self._running is not None:
            if self._running.poll() is None:
                return
            self._running = None
        stamps = [_stamp(p) for p in source_files(self.paths)]
        if self._seen is None:
            self._seen = stamps
            if page_is_stale(self.paths):
                self._changed_at = now
        elif stamps != self._seen:
            self._seen = stamps
            self._changed_at = now  # still changing: wait for the burst to end
        if self._changed_at is None or now - self._changed_at < self.delay_s:
            return
        self._changed_at = None
        try:
            self._running = self._spawn(self.paths)
        except OSError as exc:
            log(self.paths, "page-refresh-failed", error=str(exc))
            return
        self.spawned += 1

    def stop(self) -> None:
        """Forget a running regeneration: it finishes on its own (its page write is atomic)."""
        self._running = None


def spawn_refresh(paths: DataPaths) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        python_command("memself.page.refresh", str(paths.root)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        **children.popen_detached(),
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
