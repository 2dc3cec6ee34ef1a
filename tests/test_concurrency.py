"""Many processes writing at once lose no update; a SIGKILL mid-write leaves the old file intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, days, make_store, record, write_records

# Many writer processes and SIGKILL mid-write: the full group.
pytestmark = pytest.mark.full

PROCS, OPS = 8, 50

_WORKER = """
import sys
from datetime import datetime, timedelta, timezone
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
worker = int(sys.argv[1]); ops = int(sys.argv[2])
store = MemoryStore(DataPaths.default())
now = datetime.fromisoformat(sys.argv[3])
for k in range(ops):
    kind = k % 3
    if kind == 0:
        store.create(f"进程 {worker} 新建的第 {k} 条记忆", "project", now)
    elif kind == 1:
        store.reinforce(f"r-{worker}-{k}", now)
    else:
        assert store.reward_recall([f"w-{worker}-{k}"], now, wait_s=30) , "reward lost"
"""


def test_8_processes_x_50_writes_lose_no_update() -> None:
    store = make_store()
    seeds = []
    for worker in range(PROCS):
        for k in range(OPS):
            if k % 3 == 1:
                seeds.append(record(f"r-{worker}-{k}", f"待强化的规则 {worker}-{k}", 0.5, last=T0 - days(1)))
            elif k % 3 == 2:
                seeds.append(record(f"w-{worker}-{k}", f"待召回的规则 {worker}-{k}", 0.5, last=T0 - days(1)))
    write_records(store, "rule", seeds)
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(w), str(OPS), T0.isoformat()])
        for w in range(PROCS)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * PROCS
    rules = {m.id: m for m in store.read_group("rule")}
    for worker in range(PROCS):
        for k in range(OPS):
            if k % 3 == 1:
                assert rules[f"r-{worker}-{k}"].confidence == 0.6
            elif k % 3 == 2:
                assert rules[f"w-{worker}-{k}"].confidence == 0.55
    projects = store.read_group("project")
    expected = sum(1 for k in range(OPS) if k % 3 == 0) * PROCS
    assert len(projects) == expected and len({m.id for m in projects}) == expected
    for group in ("rule", "project"):
        assert not store.load_group(group).bad_lines
    assert not store.paths.lock_dir.exists()


_WRITER = """
import sys
from datetime import datetime, timezone
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
store = MemoryStore(DataPaths.default())
now = datetime.fromisoformat(sys.argv[1])
print("go", flush=True)
i = 0
while True:
    store.replace("big", "内容" * 150 + str(i), now)
    i += 1
"""


def test_sigkill_mid_write_leaves_a_whole_file() -> None:
    store: MemoryStore = make_store()
    filler = [record(f"f{i}", "填充用的规则正文，" * 30, 0.5) for i in range(3000)]
    write_records(store, "rule", [record("big", "最初的正文内容", 0.5), *filler])
    for attempt in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, T0.isoformat()], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "go"
        time.sleep(0.3 + attempt * 0.17)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        text = store.paths.group_file("rule").read_text("utf-8")
        lines = text.splitlines()
        assert len(lines) == 3001 and text.endswith("\n")
        assert all(json.loads(line)["id"] for line in lines)
        # The killed writer's lock names a dead pid: the next writer reclaims it at once.
        store.replace("big", "恢复后的正文内容", T0)
