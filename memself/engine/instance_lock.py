"""The single-instance lock: an advisory lock on a file in the data directory.

Kept in the data directory, not next to the socket, so that processes started with different
runtime directories still agree on one engine per data directory. The kernel drops the lock
when its holder dies, so a crashed engine never blocks the next one (unlike a pid file). The
file itself is never deleted: deleting lock files reopens races.
"""

from __future__ import annotations

import os

# The lock module is imported where used: a warm engine answers the hook without any lock, so
# the hook should not pay for loading it.


def try_lock(path: str) -> int | None:
    """Take the lock without waiting; the open fd (keep it open to hold the lock) or None.
    OSError when the file cannot be opened or locked at all."""
    from memself.platform import files, locks

    fd = os.open(path, os.O_RDWR | os.O_CREAT | files.BINARY, 0o600)
    try:
        taken = locks.try_exclusive(fd)
    except BaseException:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        return None
    return fd


def can_hand_over() -> bool:
    """True where a locked fd passed to a child keeps the lock (flock locks belong to the open
    file, which the child shares); Windows' byte-range locks do not survive that."""
    from memself.platform import locks

    return locks.inherited()


def holds(fd: int, path: str) -> bool:
    """True if ``fd`` (handed over by the spawning client) is the lock file ``path`` and carries
    the lock for us."""
    from memself.platform import locks

    try:
        mine, theirs = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
        return False
    return locks.holds(fd)


def above_stdio(fd: int) -> int:
    """``fd`` moved to a number above 2 (same open file, so the lock stays): a host that closed
    our stdin would otherwise see the child's /dev/null redirection overwrite the lock fd."""
    from memself.platform import locks

    return locks.above_stdio(fd)


def release(fd: int) -> None:
    """Drop the lock (closing the fd releases it)."""
    try:
        os.close(fd)
    except OSError:
        pass


def is_held(path: str) -> bool:
    """True if some process holds the lock (an engine is starting or running)."""
    if not os.path.exists(path):
        return False
    try:
        fd = try_lock(path)
    except OSError:
        return False
    if fd is None:
        return True
    release(fd)
    return False


def read_owner(path: str) -> int | None:
    """The pid ``write_owner`` recorded; only meaningful while the lock is held (a spawned
    engine writes it a moment after it starts)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(32).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def write_owner(fd: int, pid: int) -> None:
    """Record the holder's pid in the lock file, for ``engine status`` and humans."""
    from memself.platform import files

    try:
        os.ftruncate(fd, 0)
        files.write_at(fd, f"{pid}\n".encode(), 0)
    except OSError:
        pass
