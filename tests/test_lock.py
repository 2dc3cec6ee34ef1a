"""The write lock: reclaiming dead and stale owners, the 300 ms reward wait, cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memself.errors import LockTimeout
from memself.store.lock import write_lock
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, days, make_store, record, write_records


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_of_dead_process_is_reclaimed(store: MemoryStore) -> None:
    store.paths.lock_dir.mkdir()
    (store.paths.lock_dir / f"owner-{_dead_pid()}-abc").touch()
    with write_lock(store.paths, wait_s=2):
        pass
    assert not store.paths.lock_dir.exists()
    assert "回收已退出进程的记忆写锁" in store.paths.log_file.read_text()


def test_lock_older_than_15_seconds_is_reclaimed(store: MemoryStore) -> None:
    store.paths.lock_dir.mkdir()
    owner = store.paths.lock_dir / f"owner-{os.getpid()}-old"
    owner.touch()
    old = time.time() - 16
    os.utime(owner, (old, old))
    with write_lock(store.paths, wait_s=2):
        pass
    assert "回收超时的记忆写锁" in store.paths.log_file.read_text()


def test_empty_leftover_lock_dir_does_not_block(store: MemoryStore) -> None:
    store.paths.lock_dir.mkdir()
    with write_lock(store.paths, wait_s=0.5):
        assert any(n.startswith("owner-") for n in os.listdir(store.paths.lock_dir))
    assert not store.paths.lock_dir.exists()


def test_live_fresh_lock_blocks_until_timeout(store: MemoryStore) -> None:
    store.paths.lock_dir.mkdir()
    (store.paths.lock_dir / f"owner-{os.getpid()}-live").touch()
    with pytest.raises(LockTimeout, match="等待记忆写锁超时"):
        with write_lock(store.paths, wait_s=0.1):
            pass
    assert not [p for p in store.paths.root.iterdir() if p.name.startswith(".memory-write-")]


_HOLDER = """
import sys, time
from memself.paths import DataPaths
from memself.store.lock import write_lock
with write_lock(DataPaths.default()):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_recall_reward_gives_up_after_300ms_and_logs(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5, last=T0 - days(1))])
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        assert store.reward_recall(["a"], T0) == {}
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert 0.25 <= waited < 30.0  # gave up, long before the holder lets go
    assert "recall-reward-failed" in store.paths.log_file.read_text()
    assert "ids" in store.paths.log_file.read_text()
    # After the holder is gone (killed: its lock is reclaimed), a retry works.
    assert store.reward_recall(["a"], T0) == {"a": pytest.approx(0.05)}


def test_a_lock_released_while_it_is_looked_at_blocks_nothing(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its holder removes the lock between the check's two reads of it (several processes adding
    # at once): that is a free lock, not a broken one.
    from memself.store import lock

    lock_dir = store.paths.lock_dir
    lock_dir.mkdir()
    real_listdir = os.listdir

    def released_first(path: str | os.PathLike[str]) -> list[str]:
        if os.fspath(path) == os.fspath(lock_dir) and lock_dir.exists():
            lock_dir.rmdir()  # the holder's release lands here
        return real_listdir(path)

    monkeypatch.setattr(lock.os, "listdir", released_first)
    assert lock.lock_problem(lock_dir) == ""
    with write_lock(store.paths, 1.0):
        pass
