"""The cross-process write lock of the memory files, compatible with the original plugin's.

Two locks, always taken in this order:

1. A kernel lock (``flock``, or a byte-range lock on Windows: ``memself.platform.locks``) on
   ``.memory-write.flock`` that every memself writer takes first.
   The kernel drops it when its owner dies, so it needs no lease: a memself writer that is
   paused (SIGSTOP, a suspended laptop, a debugger) keeps it, and no other memself writer ever
   takes the memory files away from a live one. Waiters poll it every 20 ms until their deadline.
2. The original's directory lock ``.memory-write.lock`` holding one file ``owner-<pid>-<uuid>``,
   taken by renaming a prepared temp directory onto that path (the rename fails while a
   non-empty lock exists, and replaces an empty leftover). memself keeps taking it so that
   memself and the Node plugin exclude each other while a user switches between them.

Whoever holds the kernel lock knows that no live memself writer holds the directory lock, so a
directory lock it meets belongs to a dead process (reclaimed at once) or to a program that does
not use the kernel lock, i.e. the original plugin (reclaimed by the original's rule: its owner
file is older than 15 s). The owner file's age starts when the lock is acquired, not when the
wait began. The original plugin may still take the directory lock from a paused memself writer
by that rule; the writer then finds out before it writes (``LockHandle.still_held`` and the
store's file generation check) and fails loudly instead of writing over the other's change.

A lock path that no protocol can clear (a regular file, a directory holding foreign files)
fails the write at once with a message naming the path and the fix, instead of a timeout.
The recall reward waits only 300 ms.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from memself.errors import LockBroken, LockTimeout
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import files as platform_files
from memself.platform import processes

STALE_AFTER_S = 15.0
POLL_S = 0.02
DEFAULT_WAIT_S = 10.0
REWARD_WAIT_S = 0.3
KERNEL_LOCK_NAME = ".memory-write.flock"
OWNER_PREFIX = "owner-"
STAGING_PREFIX = ".memory-write-"


def pid_alive(pid: int) -> bool:
    return processes.pid_alive(pid)


def owner_pid(name: str) -> int:
    """The pid in ``owner-<pid>-<uuid>``; -1 when the name carries none."""
    parts = name.split("-")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else -1


class LockHandle:
    """What a holder can ask about its lock while it holds it."""

    def __init__(self, paths: DataPaths, owner_name: str) -> None:
        self.paths = paths
        self.owner_name = owner_name

    def still_held(self) -> bool:
        """False once another program has taken the directory lock from us (see the module doc)."""
        return os.path.lexists(self.paths.lock_dir / self.owner_name)


def lock_problem(lock_dir: Path) -> str:
    """Why ``lock_dir`` blocks every writer for good, or "" when it is absent or an ordinary lock.

    A lock directory only ever holds one ``owner-*`` file (it is prepared before it is renamed
    into place), so anything else in it was put there by something other than a lock.
    """
    try:
        info = os.lstat(lock_dir)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"记忆写锁 {lock_dir} 无法读取（{exc.strerror or exc}），写入被挡住了"
    if not stat.S_ISDIR(info.st_mode):
        kind = (
            "符号链接"
            if stat.S_ISLNK(info.st_mode)
            else "普通文件"
            if stat.S_ISREG(info.st_mode)
            else "特殊文件"
        )
        return (
            f"记忆写锁 {lock_dir} 不是目录（是{kind}），所有写入都被它挡住了。它不是 memself 或原插件"
            f"创建的锁；确认它没有用处后删掉即可：rm {lock_dir}"
        )
    try:
        names = os.listdir(lock_dir)
    except FileNotFoundError:
        return ""  # released since the lstat: free, not broken
    except OSError as exc:
        return f"记忆写锁 {lock_dir} 无法读取（{exc.strerror or exc}），写入被挡住了"
    foreign = sorted(n for n in names if not n.startswith(OWNER_PREFIX))
    if foreign and not any(n.startswith(OWNER_PREFIX) for n in names):
        shown = "、".join(foreign[:3]) + ("等" if len(foreign) > 3 else "")
        return (
            f"记忆写锁目录 {lock_dir} 里有不属于锁的文件（{shown}），所有写入都被它挡住了。确认没有"
            f" memself 或原插件正在写入后删掉这个目录即可：rm -r {lock_dir}"
        )
    return ""


def _owner_of(lock_dir: Path) -> tuple[str, int, float] | None:
    """(owner file name, pid, age in seconds) of a held lock, or None when it is empty or gone."""
    try:
        names = [n for n in os.listdir(lock_dir) if n.startswith(OWNER_PREFIX)]
    except OSError:
        return None
    if not names:
        return None
    name = names[0]
    try:
        age = time.time() - (lock_dir / name).stat().st_mtime
    except OSError:
        return None
    return name, owner_pid(name), age


def _try_reclaim(paths: DataPaths, owner: tuple[str, int, float]) -> None:
    """Move a dead or stale directory lock aside, if it is still the same owner after the move.

    Called only while we hold the kernel lock: the owner is then not a live memself writer.
    """
    name, pid, age = owner
    dead = not pid_alive(pid)
    if not dead and age < STALE_AFTER_S:
        return
    aside = paths.root / f"{STAGING_PREFIX}{os.getpid()}-stale-{uuid.uuid4().hex[:12]}"
    try:
        os.rename(paths.lock_dir, aside)
    except OSError:
        return
    if (aside / name).exists():
        why = "回收已退出进程的记忆写锁" if dead else "回收超时的记忆写锁"
        log(paths, "lock-reclaimed", reason=why, pid=pid, age_s=round(age, 1))
        shutil.rmtree(aside, ignore_errors=True)
        return
    # Someone else reclaimed and re-took the lock between our look and our move: give it back.
    try:
        os.rename(aside, paths.lock_dir)
    except OSError:
        shutil.rmtree(aside, ignore_errors=True)


class _KernelLock:
    """A kernel lock on a file that is never removed (removing it would let two holders coexist)."""

    def __init__(self, paths: DataPaths, deadline: float) -> None:
        from memself.platform import locks

        self.fd = -1
        path = paths.root / KERNEL_LOCK_NAME
        flags = platform_files.CLOEXEC | platform_files.NOFOLLOW | platform_files.BINARY
        read_only = False
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o600)
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.ELOOP, errno.ENXIO):
                raise LockBroken(
                    f"记忆写锁文件 {path} 不是普通文件，写入被挡住了；删掉它即可：rm -r {path}"
                ) from exc
            # A read-only data folder: the write fails later with the usual message, or, when
            # the lock file exists, read-only is enough for flock.
            fd = os.open(path, os.O_RDONLY | flags)
            read_only = True
        try:
            try:
                taken = locks.exclusive(fd, deadline=deadline)
            except OSError as exc:
                if read_only:  # a byte-range lock wants a writable file: the folder is the cause
                    raise
                # A file system without locks (some network drives): waiting would not help,
                # and writing without the lock could lose another writer's change.
                raise LockBroken(
                    f"记忆写锁文件 {path} 无法加锁（{exc.strerror or exc}）：它所在的文件系统"
                    "（例如网络盘）不支持文件锁，为了不丢失记忆没有写入。请把数据目录放到本机磁盘上"
                    "（环境变量 MEMSELF_HOME 可以指定位置）"
                ) from exc
            if not taken:
                raise LockTimeout(_timeout_message(fd))
            # Only for the waiters' message: who is holding us up.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                platform_files.write_at(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the last descriptor drops the lock
            self.fd = -1


def _timeout_message(fd: int) -> str:
    try:
        holder = platform_files.read_at(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        holder = ""
    if holder.isdigit() and pid_alive(int(holder)):
        return (
            f"等待记忆写锁超时：memself 进程 {holder} 正在写入记忆。如果它被挂起了（例如 Ctrl-Z），"
            "让它继续或结束它后再试"
        )
    return "等待记忆写锁超时"


@contextlib.contextmanager
def write_lock(paths: DataPaths, wait_s: float = DEFAULT_WAIT_S) -> Iterator[LockHandle]:
    """Hold the memory write lock for the duration of the block, or raise ``LockTimeout``
    (busy past ``wait_s``) or ``LockBroken`` (a lock path nothing can clear)."""
    paths.ensure()
    deadline = time.monotonic() + wait_s
    problem = lock_problem(paths.lock_dir)
    if problem:
        raise LockBroken(problem)
    kernel = _KernelLock(paths, deadline)
    try:
        with _directory_lock(paths, deadline) as handle:
            yield handle
    finally:
        kernel.release()


@contextlib.contextmanager
def _directory_lock(paths: DataPaths, deadline: float) -> Iterator[LockHandle]:
    # Our pid in the name tells a later writer whose leftover an (empty) staging folder is.
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=paths.root))
    owner_name = f"{OWNER_PREFIX}{os.getpid()}-{uuid.uuid4()}"
    fd = os.open(staging / owner_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | platform_files.BINARY, 0o600)
    os.close(fd)
    acquired = False
    try:
        while True:
            # The owner file's age is what others measure our lease by: it must start now, not
            # when we began to wait.
            os.utime(staging / owner_name)
            try:
                os.rename(staging, paths.lock_dir)
                acquired = True
                break
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                    raise
            problem = lock_problem(paths.lock_dir)
            if problem:
                raise LockBroken(problem)
            owner = _owner_of(paths.lock_dir)
            if owner is not None:
                _try_reclaim(paths, owner)
            else:
                # An empty leftover (a holder that died between removing its owner file and the
                # folder): POSIX's rename replaces it, Windows' refuses to, so remove it. A lock
                # being taken is never empty (its owner file is in it before the rename).
                with contextlib.suppress(OSError):
                    os.rmdir(paths.lock_dir)
            if time.monotonic() >= deadline:
                raise LockTimeout(f"等待记忆写锁超时：另一个程序（多半是原插件）正持有 {paths.lock_dir}")
            time.sleep(POLL_S)
        yield LockHandle(paths, owner_name)
    finally:
        if acquired:
            _release(paths, owner_name)
        else:
            shutil.rmtree(staging, ignore_errors=True)


def _release(paths: DataPaths, owner_name: str) -> None:
    owner_file = paths.lock_dir / owner_name
    try:
        os.unlink(owner_file)
    except FileNotFoundError:
        # Our lock was reclaimed while we held it; the new holder's lock is not ours.
        log(paths, "lock-lost", owner=owner_name)
        return
    with contextlib.suppress(OSError):
        os.rmdir(paths.lock_dir)
