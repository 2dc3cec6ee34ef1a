"""Files on each system: open flags, positioned reads and writes, what "private" means, and a
replace that survives Windows' sharing rules.

Windows has no ``O_CLOEXEC`` (``O_NOINHERIT`` says the same), no ``O_NOFOLLOW``, no ``pread`` or
``pwrite``, and no Unix permission bits: a file there is private by the per-user ACL of the
folder it is in (the profile, ``%LOCALAPPDATA%``), so mode checks apply only where modes mean
something. A file that another program holds open (an antivirus scan, a sync client, an editor)
cannot be replaced on Windows: ``replace`` retries for a bounded time and then raises an error
naming the path, leaving the old file as it was.

Standard library only: the hook path writes through it.
"""

import contextlib
import os
import stat
import time

from memself.platform import system

CLOEXEC: int = getattr(os, "O_CLOEXEC", 0) or getattr(os, "O_NOINHERIT", 0)
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
BINARY: int = getattr(os, "O_BINARY", 0)
# How long a replace keeps trying while another program holds the target open (Windows).
REPLACE_RETRY_S = 2.0
_REPLACE_POLL_S = 0.05
# How long an append waits for another process's append (Windows): a log line must not hold up
# a hook.
APPEND_LOCK_WAIT_S = 0.2


class ReplaceBlocked(PermissionError):
    """A replace that another program kept blocking past the retry bound; the old file is intact."""

    def __init__(self, target: str, cause: OSError) -> None:
        super().__init__(
            cause.errno,
            f"无法替换 {target}：另一个程序（常见的是杀毒软件、同步盘或编辑器）一直占用着它，"
            f"已重试 {REPLACE_RETRY_S:g} 秒；原文件没有改动。关掉占用它的程序后再试，"
            "或把这个文件夹加入杀毒软件的排除列表",
        )
        self.target = target


def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.replace``, retried on Windows while another program holds ``dst`` (or ``src``) open."""
    if not system.windows():
        os.replace(src, dst)
        return
    deadline = time.monotonic() + REPLACE_RETRY_S
    while True:
        try:
            os.replace(src, dst)
            return
        except PermissionError as exc:
            if time.monotonic() >= deadline:
                raise ReplaceBlocked(os.fspath(dst), exc) from exc
        time.sleep(_REPLACE_POLL_S)


def read_at(fd: int, size: int, offset: int) -> bytes:
    """``os.pread`` where it exists; a seek and a read elsewhere (the descriptor is ours alone)."""
    if not system.windows():
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def write_at(fd: int, data: bytes, offset: int) -> int:
    """``os.pwrite`` where it exists; a seek and a write elsewhere."""
    if not system.windows():
        return os.pwrite(fd, data, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.write(fd, data)


def append_whole(
    path: str | os.PathLike[str],
    data: bytes,
    mode: int = 0o600,
    *,
    follow: bool = True,
    durable: bool = False,
) -> None:
    """Append ``data`` to ``path`` in one piece, while other processes may append to it too.

    POSIX ``O_APPEND`` moves to the end and writes in one step. Windows' C runtime only emulates
    it, by a seek to the end and then a write, so two processes appending at once can write at
    the same offset and one line overwrites the other. There the seek and the write hold the
    file's lock (``memself.platform.locks``, a byte far past any content), waited for at most
    ``APPEND_LOCK_WAIT_S``: past that, or where the file cannot be locked, the data is written
    unlocked rather than not at all.

    ``follow`` False: a link at ``path`` is refused (``O_NOFOLLOW``, where the system has it);
    ``durable``: the data is flushed to disk before this returns."""
    flags = os.O_WRONLY | os.O_CREAT | BINARY | CLOEXEC | (0 if follow else NOFOLLOW)
    windows = system.windows()
    fd = os.open(path, flags | (0 if windows else os.O_APPEND), mode)
    try:
        if windows:
            from memself.platform import locks

            with contextlib.suppress(OSError):
                locks.exclusive(fd, deadline=time.monotonic() + APPEND_LOCK_WAIT_S)
            os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        while view:  # a regular file takes it all at once; a full disk may take a part
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)  # drops the lock


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a file already written and closed. Windows flushes only through a descriptor that
    may write (``FlushFileBuffers`` refuses a read-only one), so there it is opened for writing;
    nothing is written."""
    flags = (os.O_RDWR | BINARY) if system.windows() else os.O_RDONLY
    fd = os.open(path, flags | CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def modes_meaningful() -> bool:
    """True where permission bits and owners decide who may read a file (not on Windows)."""
    return not system.real_windows()


def own_uid() -> int | None:
    """Our uid where the system has uids that a peer check can compare; None on Windows."""
    if system.windows():
        return None
    return os.getuid()


def private_problem(info: os.stat_result) -> str:
    """Why a file or folder with this ``lstat`` is not private to us, in words for the user;
    "" when it is (or where modes mean nothing)."""
    if not modes_meaningful():
        return ""
    uid = os.getuid()
    if info.st_uid != uid:
        return f"属于另一个用户（uid {info.st_uid}）"
    if info.st_mode & 0o077:
        return f"其他用户可以访问（权限 {stat.S_IMODE(info.st_mode):o}）"
    return ""
