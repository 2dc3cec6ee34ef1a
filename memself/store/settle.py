"""Work that follows the memory files once they settle: the engine's idle tasks (regenerating the
page, syncing) start a detached child a little after a burst of writes ends, one at a time.

``tick`` is called with a monotonic clock on every turn of the engine's serve loop. It compares
the stamps of the group files and the trash with the last ones it saw; a change restarts the
wait, and once they have been still for ``delay_s`` the task's ``spawn`` runs. A change seen
while a child runs is picked up by the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memself.logs import log
from memself.paths import DataPaths
from memself.store.journal import Stamp, file_stamp


def memory_files(paths: DataPaths) -> list[Path]:
    """The files a write changes: the two group files and the trash."""
    return [paths.group_file("rule"), paths.group_file("project"), paths.trash]


def memory_stamps(paths: DataPaths) -> list[Stamp | None]:
    """Each memory file's stamp (``journal.file_stamp``), None where it cannot be read."""
    stamps: list[Stamp | None] = []
    for path in memory_files(paths):
        try:
            stamps.append(file_stamp(path))
        except OSError:
            stamps.append(None)
    return stamps


def _never(paths: DataPaths) -> bool:
    return False


def _always(paths: DataPaths) -> bool:
    return True


class AfterWritesSettle:
    """One idle task: ``spawn(paths)`` returns something with ``poll()`` (a ``Popen``).

    ``enabled`` is asked first on every tick (nothing is watched while it says no);
    ``pending_at_start`` says whether the state found at the first tick already needs a run;
    ``failure_event`` is the log line of a spawn that failed.
    """

    def __init__(
        self,
        paths: DataPaths,
        delay_s: float,
        spawn: Callable[[DataPaths], Any],
        failure_event: str,
        *,
        enabled: Callable[[DataPaths], bool] = _always,
        pending_at_start: Callable[[DataPaths], bool] = _never,
    ) -> None:
        self.paths = paths
        self.delay_s = delay_s
        self._spawn = spawn
        self._failure_event = failure_event
        self._enabled = enabled
        self._pending_at_start = pending_at_start
        self._seen: list[Stamp | None] | None = None
        self._changed_at: float | None = None
        self._running: Any = None
        self.spawned = 0

    def tick(self, now: float) -> None:
        if not self._enabled(self.paths):
            return
        if self._running is not None:
            if self._running.poll() is None:
                return
            self._running = None
        stamps = memory_stamps(self.paths)
        if self._seen is None:
            self._seen = stamps
            if self._pending_at_start(self.paths):
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
            log(self.paths, self._failure_event, error=str(exc))
            return
        self.spawned += 1
