"""Whether a judge job's process is still there, told by a lock instead of a pid.

Before the job file exists, the prompt hook takes an exclusive ``flock`` on ``side/<id>.run``;
the judge inherits that locked descriptor (as fd ``RUN_LOCK_FD``) and keeps it until it exits.
The kernel drops the lock when the last holder is gone, however it went (SIGKILL, the OOM
killer, a crash before its first line of Python), so "running, and nobody holds the run lock"
means the judge is gone and Stop need not wait for it. A pid would not do: pids are reused, and
a job outlives its judge.

A job without a run-lock file (started by the original plugin, or by an older memself) is
"unknown" and keeps the old rule: running until ``jobs.STUCK_AFTER``.

Standard library only: the prompt hook takes the lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from memself.paths import DataPaths

try:  # POSIX only; elsewhere every job is "unknown" and Stop waits as before.
    import fcntl
except ImportError:  # pragma: no cover - not a supported platform for hooks
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".run"
# The descriptor number the judge finds its run lock on (stdio is 0-2).
RUN_LOCK_FD = 3
ALIVE = "alive"
DEAD = "dead"
UNKNOWN = "unknown"


def run_lock_path(paths: DataPaths, session_id: str) -> Path:
    return paths.side_dir / f"{session_id}{SUFFIX}"


def take(paths: DataPaths, session_id: str) -> int | None:
    """Open and lock the job's run-lock file; the descriptor (close-on-exec: only a spawn that
    hands it over passes it on), or None when another process holds it: this very job's hook
    or judge is running. The side directory must exist."""
    fd = os.open(run_lock_path(paths, session_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if fcntl is None:  # pragma: no cover
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        raise
    return fd


def probe(paths: DataPaths, session_id: str) -> str:
    """ALIVE (someone holds the run lock), DEAD (nobody does) or UNKNOWN (no run-lock file)."""
    if fcntl is None:  # pragma: no cover
        return UNKNOWN
    try:
        fd = os.open(run_lock_path(paths, session_id), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return UNKNOWN
    try:
        # Shared and non-blocking: it conflicts with the holder's exclusive lock only, and is
        # dropped at once by the close below.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return ALIVE
    except OSError:
        return UNKNOWN
    finally:
        os.close(fd)
    return DEAD
