"""The cross-process write lock of the memory files, compatible with the original plugin's.

The lock is a directory ``.memory-write.lock`` holding one file ``owner-<pid>-<uuid>``. It is taken
by renaming a prepared temp directory onto that path: the rename fails while a non-empty lock
exists, and replaces an empty leftover. Using the original's scheme means memself and the Node
plugin exclude each other while a user switches between them.

Rules (seed README): a waiter polls every 20 ms; a lock whose owner process is dead, or whose
owner file is older than 15 s, is reclaimed; the recall reward waits only 300 ms.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from memself.errors import LockTimeout
from memself.logs import log
from memself.paths import DataPaths

STALE_AFTER_S = 15.0
POLL_S = 0.02
DEFAULT_WAIT_S = 10.0
REWARD_WAIT_S = 0.3


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_of(lock_dir: Path) -> tuple[str, int, float] | None:
    """(owner file name, pid, age in seconds) of a held lock, or None when it is empty or gone."""
    try:
        names = [n for n in os.listdir(lock_dir) if n.startswith("owner-")]
    except OSError:
        return None
    if not names:
        return None
    name = names[0]
    parts = name.split("-")
    pid = int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else -1
    try:
        age = time.time() - (lock_dir / name).stat().st_mtime
    except OSError:
        return None
    return name, pid, age


def _try_reclaim(paths: DataPaths, owner: tuple[str, int, float]) -> None:
    """Move a stale lock aside, but only if it is still the same stale owner after the move."""
    name, pid, age = owner
    dead = not _pid_alive(pid)
    if not dead and age < STALE_AFTER_S:
        return
    aside = paths.root / f".memory-write-stale-{uuid.uuid4().hex[:12]}"
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


@contextlib.contextmanager
def write_lock(paths: DataPaths, wait_s: float = DEFAULT_WAIT_S) -> Iterator[None]:
    """Hold the memory write lock for the duration of the block, or raise ``LockTimeout``."""
    paths.ensure()
    deadline = time.monotonic() + wait_s
    staging = Path(tempfile.mkdtemp(prefix=".memory-write-", dir=paths.root))
    owner_name = f"owner-{os.getpid()}-{uuid.uuid4()}"
    fd = os.open(staging / owner_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    acquired = False
    try:
        while True:
            try:
                os.rename(staging, paths.lock_dir)
                acquired = True
                break
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                    raise
            owner = _owner_of(paths.lock_dir)
            if owner is not None:
                _try_reclaim(paths, owner)
            if time.monotonic() >= deadline:
                raise LockTimeout("等待记忆写锁超时")
            time.sleep(POLL_S)
        yield
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
        # Our lock was reclaimed as stale while we held it; the new holder's lock is not ours.
        log(paths, "lock-lost", owner=owner_name)
        return
    with contextlib.suppress(OSError):
        os.rmdir(paths.lock_dir)
