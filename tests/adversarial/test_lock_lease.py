"""A writer paused while it holds the write lock (SIGSTOP, a laptop lid, a debugger) must never
lose another writer's update: no memself writer takes the lock from a live memself writer, and a
writer whose lock a foreign program (the original Node plugin, by its 15 s rule) took away fails
loudly instead of writing over the other's change."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memself.store.memory_store import MemoryStore
from tests.support.helpers import make_store

# A memself writer that stops itself (SIGSTOP) inside the lock, after reading and before writing.
_PAUSING = """
import os, signal, sys
from datetime import datetime, timezone
import memself.store.lock, memself.store.memory_store as ms
from memself.paths import DataPaths
from memself.errors import MemselfError
if len(sys.argv) > 3 and sys.argv[3]:
    memself.store.lock.STALE_AFTER_S = float(sys.argv[3])
real_commit = ms.MemoryStore._commit
def pausing(self, session, now):
    if sys.argv[2] == "pause":
        print("paused", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    return real_commit(self, session, now)
ms.MemoryStore._commit = pausing
try:
    memory = ms.MemoryStore(DataPaths.default()).create(sys.argv[1], "rule", datetime.now(timezone.utc))
    print("OK", memory.id, flush=True)
except MemselfError as exc:
    print("ERR", exc, flush=True)
"""

# The original plugin's writer, as its README and code describe it: a directory lock taken by
# renaming a prepared folder, an owner that is dead or older than the threshold is reclaimed, and
# a new memory is appended as one line. Standing in for the Node program, which is not on this machine.
_FOREIGN = """
import json, os, shutil, sys, tempfile, time, uuid
root = os.environ["MEMSELF_HOME"]; lock = os.path.join(root, ".memory-write.lock")
threshold = float(sys.argv[2])
staging = tempfile.mkdtemp(prefix=".memory-write-", dir=root)
owner = f"owner-{os.getpid()}-{uuid.uuid4()}"
open(os.path.join(staging, owner), "w").close()
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
while True:
    try:
        os.rename(staging, lock)
        break
    except OSError:
        pass
    try:
        name = [n for n in os.listdir(lock) if n.startswith("owner-")][0]
        age = time.time() - os.stat(os.path.join(lock, name)).st_mtime
        if not alive(int(name.split("-")[1])) or age > threshold:
            aside = lock + ".stale-" + uuid.uuid4().hex
            os.rename(lock, aside)
            shutil.rmtree(aside)
            continue
    except (OSError, IndexError):
        pass
    time.sleep(0.02)
record = {"id": sys.argv[1], "text": "原插件写入的一条规则", "confidence": 0.5, "category": "rule"}
with open(os.path.join(root, "rule.jsonl"), "a", encoding="utf-8") as fh:
    fh.write(json.dumps(record, ensure_ascii=False) + "\\n")
os.unlink(os.path.join(lock, owner))
os.rmdir(lock)
print("OK", sys.argv[1], flush=True)
"""


def _start(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )


def _wait_stopped(proc: subprocess.Popen) -> None:
    assert proc.stdout.readline().strip() == "paused"
    stat = Path(f"/proc/{proc.pid}/stat")
    for _ in range(500):
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.01)
    raise AssertionError("the writer did not stop")


def _results(*procs: subprocess.Popen) -> list[str]:
    return [p.communicate(timeout=120)[0].strip() for p in procs]


def _lost(store: MemoryStore, outputs: list[str]) -> list[str]:
    present = {m.id for m in store.all()}
    acked = [line.split()[1] for out in outputs for line in out.splitlines() if line.startswith("OK ")]
    return [mem_id for mem_id in acked if mem_id not in present]


def _paused_memself_vs_memself(pause_s: float, stale_s: str) -> tuple[list[str], list[str]]:
    store = make_store()
    writer_a = _start(_PAUSING, "暂停的写入者写的规则", "pause", stale_s)
    _wait_stopped(writer_a)
    time.sleep(pause_s)
    writer_b = _start(_PAUSING, "另一个写入者写的规则", "go", stale_s)
    time.sleep(1.0)  # B has met the held lock (and, before the fix, taken it)
    os.kill(writer_a.pid, signal.SIGCONT)
    outputs = _results(writer_a, writer_b)
    return outputs, _lost(store, outputs)


@pytest.mark.full
def test_paused_writer_past_the_real_15_s_loses_no_update() -> None:
    outputs, lost = _paused_memself_vs_memself(16.0, "")
    assert lost == [], outputs
    assert all(out.startswith("OK ") for out in outputs), outputs


@pytest.mark.full
def test_paused_writer_many_trials_with_a_short_threshold() -> None:
    for _trial in range(10):
        outputs, lost = _paused_memself_vs_memself(1.2, "0.5")
        assert lost == [], outputs
        assert all(out.startswith("OK ") for out in outputs), outputs


def _paused_memself_vs_foreign(pause_s: float, threshold: str) -> tuple[list[str], list[str]]:
    store = make_store()
    writer = _start(_PAUSING, "暂停的写入者写的规则", "pause")
    _wait_stopped(writer)
    time.sleep(pause_s)
    foreign = _start(_FOREIGN, f"mem-foreign-{time.monotonic_ns()}", threshold)
    first = foreign.stdout.readline().strip()
    assert first.startswith("OK "), "the foreign writer never got the lock"
    os.kill(writer.pid, signal.SIGCONT)
    outputs = _results(writer, foreign)
    outputs[1] = first
    return outputs, _lost(store, outputs)


@pytest.mark.full
def test_paused_writer_whose_lock_the_original_plugin_took_fails_loudly() -> None:
    outputs, lost = _paused_memself_vs_foreign(15.5, "15")
    assert lost == [], outputs
    assert outputs[0].startswith("ERR ") and "其他程序" in outputs[0], outputs


@pytest.mark.full
def test_lock_taken_by_the_original_plugin_many_trials() -> None:
    for _trial in range(10):
        outputs, lost = _paused_memself_vs_foreign(0.8, "0.5")
        assert lost == [], outputs
        assert outputs[0].startswith("ERR "), outputs


def test_owner_age_starts_when_the_lock_is_acquired() -> None:
    store = make_store()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = store.paths.lock_dir
        lock.mkdir()
        (lock / f"owner-{sleeper.pid}-foreign").touch()  # a live foreign holder, fresh
        writer = _start(_PAUSING, "等锁之后写入的规则", "pause")
        time.sleep(4.0)
        (lock / f"owner-{sleeper.pid}-foreign").unlink()
        lock.rmdir()
        _wait_stopped(writer)
        seen = time.time()
        owner = next(p for p in lock.iterdir() if p.name.startswith("owner-"))
        age = seen - owner.stat().st_mtime
        os.kill(writer.pid, signal.SIGCONT)
        assert _results(writer)[0].startswith("OK ")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert age < 2.0, f"the lease counted {age:.1f} s spent waiting"


_HOLDER = """
import sys, time
from memself.paths import DataPaths
from memself.store.lock import write_lock
with write_lock(DataPaths.default()):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_a_live_memself_holder_is_never_reclaimed_by_age() -> None:
    from memself.errors import LockTimeout
    from memself.store.lock import write_lock

    store = make_store()
    holder = _start(_HOLDER, "30")
    try:
        assert holder.stdout.readline().strip() == "held"
        owner = next(p for p in store.paths.lock_dir.iterdir() if p.name.startswith("owner-"))
        old = time.time() - 60
        os.utime(owner, (old, old))  # as if it had been paused for a minute
        with pytest.raises(LockTimeout, match=f"进程 {holder.pid} 正在写入记忆"):
            with write_lock(store.paths, wait_s=0.5):
                pass
        assert owner.exists()
    finally:
        holder.kill()
        holder.wait()
    # Once the holder is gone (killed), its locks go with it and the next writer proceeds.
    with write_lock(store.paths, wait_s=2):
        pass
