"""``msvcrt.locking`` for the foreign-platform mode on Linux: the same calls and semantics.

Windows' byte-range locks belong to one open handle (two handles of one process conflict) and go
with the handle's close or the process's death; Linux's open-file-description locks
(``F_OFD_SETLK``) behave the same way, so the Windows branch of ``memself.platform.locks`` runs
here unchanged: a lock starts at the descriptor's current position, ``LK_NBLCK`` fails at once
with EACCES when someone holds it, ``LK_LOCK`` tries ten times a second apart.

Linux only (x86-64 and arm64 share the ``struct flock`` layout packed below).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import time

LK_UNLCK = 0
LK_LOCK = 1
LK_NBLCK = 2
LK_RLCK = 3
LK_NBRLCK = 4

# struct flock {short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;}
_FLOCK = "hh4xqqi4x"
_SETLK: int = getattr(fcntl, "F_OFD_SETLK", 37)


def _set(fd: int, kind: int, start: int, length: int) -> None:
    fcntl.fcntl(fd, _SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, start, length, 0))


def locking(fd: int, mode: int, nbytes: int) -> None:
    start = os.lseek(fd, 0, os.SEEK_CUR)
    if mode == LK_UNLCK:
        _set(fd, fcntl.F_UNLCK, start, nbytes)
        return
    tries = 10 if mode in (LK_LOCK, LK_RLCK) else 1
    for attempt in range(tries):
        try:
            _set(fd, fcntl.F_WRLCK, start, nbytes)
            return
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
        if attempt + 1 < tries:
            time.sleep(1.0)
    raise OSError(errno.EDEADLK if tries > 1 else errno.EACCES, os.strerror(errno.EACCES))
