"""Advisory file locks that the kernel drops when their holder dies: ``flock`` on POSIX,
``msvcrt.locking`` byte ranges on Windows.

A lock is taken on an open descriptor; ``slot`` picks one of a few independent locks on the same
file (POSIX ``flock`` has one per file, so every slot is the whole file there). On Windows the
locked byte lies far beyond any content: Windows' locks are mandatory, and a locked range could
not be read (the engine's lock file carries its pid for ``engine status``).

``try_exclusive`` answers False when another holder has the lock and raises ``OSError`` when the
file system cannot lock at all (a network drive without lock support): callers name the path.

``inherited`` says whether a child that is handed the locked descriptor keeps the lock (``flock``
locks belong to the open file, shared with the child); Windows' do not survive that, so there the
child takes a lock of its own.

Standard library only, imported lazily: a warm engine answers the hook without any lock.
"""

from __future__ import annotations

import errno
import os
import time

from memself.platform import system

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs the hook milliseconds
    from typing import Any

# Below 2**31: the C runtime's _locking takes the current position as a 32-bit long.
_WINDOWS_REGION = 0x7FFF0000
# The errors a byte-range lock reports when someone else holds it (msvcrt: EACCES or EDEADLOCK).
_BUSY_ERRNOS = frozenset(
    {errno.EACCES, errno.EAGAIN, errno.EDEADLK, getattr(errno, "EDEADLOCK", errno.EDEADLK)}
)
POLL_S = 0.02


def inherited() -> bool:
    """True where a locked descriptor handed to a child keeps the lock for the child."""
    return not system.windows()


def _msvcrt() -> Any:
    """``msvcrt`` on Windows; its emulation (same calls, same semantics) in the foreign mode."""
    if system.real_windows():
        return __import__("msvcrt")
    from memself.platform import msvcrt_emulation

    return msvcrt_emulation


def _fcntl() -> Any:
    return __import__("fcntl")


def try_exclusive(fd: int, slot: int = 0) -> bool:
    """Take the exclusive lock without waiting: True when taken (or already ours on this open
    file), False when another holder has it; OSError when the file cannot be locked."""
    if not system.windows():
        fcntl = _fcntl()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    msvcrt = _msvcrt()
    os.lseek(fd, _WINDOWS_REGION + slot, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as exc:
        if exc.errno in _BUSY_ERRNOS:
            return False
        raise
    return True


def exclusive(fd: int, slot: int = 0, deadline: float | None = None) -> bool:
    """Wait for the exclusive lock until ``deadline`` (``time.monotonic()``; None: for ever);
    False when the deadline passed. OSError when the file cannot be locked."""
    if deadline is None and not system.windows():
        fcntl = _fcntl()
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    while not try_exclusive(fd, slot):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def held_elsewhere(fd: int, slot: int = 0) -> bool:
    """True when another holder has the lock (probed without keeping anything); OSError when the
    file cannot be locked. ``fd`` is a descriptor of our own that holds no lock."""
    if not system.windows():
        fcntl = _fcntl()
        try:
            # Shared: it conflicts with an exclusive holder only, and goes with the caller's close.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    if not try_exclusive(fd, slot):
        return True
    unlock(fd, slot)
    return False


def unlock(fd: int, slot: int = 0) -> None:
    """Drop the lock; closing the descriptor drops it too."""
    if not system.windows():
        fcntl = _fcntl()
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    msvcrt = _msvcrt()
    os.lseek(fd, _WINDOWS_REGION + slot, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def holds(fd: int) -> bool:
    """True if the open file of ``fd`` (handed over by a parent) carries the exclusive lock for
    us; only where locks are inherited."""
    if not inherited():
        return False
    try:
        return try_exclusive(fd)  # a no-op when this open file already holds it
    except OSError:
        return False


def above_stdio(fd: int) -> int:
    """``fd`` moved to a number above 2 (same open file, so an inherited lock stays): a host that
    closed our stdin would otherwise see a child's /dev/null redirection overwrite it."""
    if fd > 2 or not inherited():
        return fd
    fcntl = _fcntl()
    moved: int = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    os.close(fd)
    return moved
