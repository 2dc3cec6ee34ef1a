"""Whether a judge job's process is still there, told by a lock instead of a pid.

Before the job file exists, the prompt hook takes an exclusive ``flock`` on ``side/<id>.run``;
the judge inherits that locked descriptor (as fd ``RUN_LOCK_FD``) and keeps it until it exits.
The kernel drops the lock when the last holder is gone, however it went (SIGKILL, the OOM
killer, a crash before its first line of Python), so "running, and nobody holds the run lock"
means the judge is gone and Stop need not wait for it. A pid would not do: pids are reused, and
a job outlives its judge.

A job without a run-lock file (started by the original plugin, or by an older memself) is
"unknown" and keeps the old rule: running until ``jobs.STUCK_AFTER``.

Where a locked descriptor handed to a child does not keep the lock for it (Windows' byte-range
locks: ``memself.platform.locks.inherited``), the hook's lock (slot 0) lasts only until the hook
closes it, and the judge takes one of its own (slot 1) as it starts, then marks the file. So:
either slot held means alive; neither held means dead once the judge has marked the file, or once
``START_GRACE_S`` has passed since the hook created it (a judge that died before its first line).

Standard library only: the prompt hook takes the lock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memself.paths import DataPaths
from memself.platform import files, locks

SUFFIX = ".run"
# The descriptor number the judge finds its run lock on (stdio is 0-2).
RUN_LOCK_FD = 3
ALIVE = "alive"
DEAD = "dead"
UNKNOWN = "unknown"
# Without inherited locks: how long a judge may take to start and take its own lock.
START_GRACE_S = 30.0
_HOOK_SLOT = 0
_JUDGE_SLOT = 1
_STARTED_MARK = b"judge\n"
# The judge's own lock, held until the process exits (without inherited locks only).
_held: list[int] = []


def run_lock_path(paths: DataPaths, session_id: str) -> Path:
    return paths.side_dir / f"{session_id}{SUFFIX}"


def take(paths: DataPaths, session_id: str) -> int | None:
    """Open and lock the job's run-lock file; the descriptor (close-on-exec: only a spawn that
    hands it over passes it on), or None when another process holds it: this very job's hook
    or judge is running. The side directory must exist."""
    fd = os.open(
        run_lock_path(paths, session_id), os.O_RDWR | os.O_CREAT | files.CLOEXEC | files.BINARY, 0o600
    )
    try:
        taken = locks.try_exclusive(fd, _HOOK_SLOT)
        if taken and not locks.inherited():
            # A file left by an earlier run of this id: its mark and age must not speak for this one.
            os.ftruncate(fd, 0)
            os.utime(run_lock_path(paths, session_id))
    except BaseException:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        return None
    return fd


def hold_as_judge(paths: DataPaths, session_id: str) -> None:
    """In the judge, where the hook's lock was not inherited: lock the judge's own slot until
    this process exits, and mark the file so that a later probe knows the judge started."""
    if locks.inherited():
        return
    fd = judge_lock(paths, session_id)
    if fd is not None:
        _held.append(fd)


def judge_lock(paths: DataPaths, session_id: str) -> int | None:
    """The judge's own lock on the run-lock file, the file marked as started; the descriptor
    (closing it ends the judge's claim), or None when there is no file or no lock to take."""
    try:
        fd = os.open(run_lock_path(paths, session_id), os.O_RDWR | files.CLOEXEC | files.BINARY)
    except OSError:
        return None  # no run-lock file: the job is "unknown" to Stop, as an older memself's
    try:
        if locks.try_exclusive(fd, _JUDGE_SLOT):
            files.write_at(fd, _STARTED_MARK, 0)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def probe(paths: DataPaths, session_id: str) -> str:
    """ALIVE (someone holds the run lock), DEAD (nobody does) or UNKNOWN (no run-lock file)."""
    path = run_lock_path(paths, session_id)
    try:
        fd = os.open(path, (os.O_RDONLY if locks.inherited() else os.O_RDWR) | files.CLOEXEC | files.BINARY)
    except OSError:
        return UNKNOWN
    try:
        if locks.inherited():
            return ALIVE if locks.held_elsewhere(fd) else DEAD
        if locks.held_elsewhere(fd, _HOOK_SLOT) or locks.held_elsewhere(fd, _JUDGE_SLOT):
            return ALIVE
        if files.read_at(fd, len(_STARTED_MARK), 0) == _STARTED_MARK:
            return DEAD
        return ALIVE if time.time() - os.fstat(fd).st_mtime < START_GRACE_S else DEAD
    except OSError:
        return UNKNOWN
    finally:
        os.close(fd)
