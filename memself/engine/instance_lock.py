"""The single-instance lock: an advisory lock on a file in the data directory.

Kept in the data directory, not next to the socket, so that processes started with different
runtime directories still agree on one engine per data directory. The kernel drops the lock
when its holder dies, so a crashed engine never blocks the next one (unlike a pid file). The
file itself is never deleted: deleting lock files reopens races.
"""

from __future__ import annotations

import os
import sys

# fcntl is imported where used: a warm engine answers the hook without any lock, so the hook
# should not pay for loading the extension module.
_POSIX_LOCKS = sys.platform != "win32"


def try_lock(path: str) -> int | None:
    """Take the lock without waiting; the open fd (keep it open to hold the lock) or None."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # sys.platform rather than _POSIX_LOCKS: type checkers take the branch of the platform
        # they check, and msvcrt's locking exists on Windows only.
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        os.close(fd)
        return None
    return fd


def can_hand_over() -> bool:
    """True where a locked fd passed to a child keeps the lock (flock locks belong to the open
    file, which the child shares); Windows' byte-range locks do not survive that."""
    return _POSIX_LOCKS


def holds(fd: int, path: str) -> bool:
    """True if ``fd`` (handed over by the spawning client) is the lock file ``path`` and carries
    the lock for us."""
    if not _POSIX_LOCKS:
        return False
    import fcntl

    try:
        mine, theirs = os.fstat(fd), os.stat(path)
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a no-op when this open file holds it
    except OSError:
        return False
    return True


def above_stdio(fd: int) -> int:
    """``fd`` moved to a number above 2 (same open file, so the lock stays): a host that closed
    our stdin would otherwise see the child's /dev/null redirection overwrite the lock fd."""
    if fd > 2 or not _POSIX_LOCKS:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    os.close(fd)
    return moved


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
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{pid}\n".encode(), 0)
    except (OSError, AttributeError):
        pass
