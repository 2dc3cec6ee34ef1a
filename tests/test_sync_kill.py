"""SIGKILL ``memself sync`` at random points, again and again, with writes on both machines in
between: the next sync loses nothing, duplicates nothing and leaves no torn line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.support.original_reader import original_reads
from tests.support.sync_helpers import Machine, at, bare_repo, remote_file, strict_lines


def _one_sync_seconds(env: dict[str, str]) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "memself", "sync"], env=env, capture_output=True, check=True)
    return time.monotonic() - start


def _kill_loop(tmp_path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    remote = bare_repo(tmp_path / "memories.git")
    a, b = Machine(tmp_path / "a", remote), Machine(tmp_path / "b", remote)
    a.init()
    b.init()
    env = {**os.environ, "MEMSELF_HOME": str(a.paths.root)}
    span = _one_sync_seconds(env) * 1.2
    expected: set[str] = set()
    replaced: dict[str, str] = {}
    minute = 0
    killed = i = 0
    while killed < kills:
        # A sync that ended before its kill tests nothing, so the loop runs until this many
        # really died part way (the first, timed sync can be slower than the ones that follow).
        assert i < kills * 4, f"only {killed} of {i} syncs were still running when killed"
        minute += 1
        text = f"甲机第 {i} 条记忆：保持改动小而清楚"
        mem_id = a.add(text, minute)
        expected.add(text)
        if i % 5 == 4:
            new = f"甲机第 {i} 条记忆：保持改动小而清楚（已改写）"
            a.store.replace(mem_id, new, at(minute))
            expected.discard(text)
            expected.add(new)
            replaced[mem_id] = new
        other = f"乙机第 {i} 条记忆：先写测试再修改代码"
        b.add(other, minute)
        expected.add(other)
        if i % 3 == 0:
            b.sync(minute)
        child = subprocess.Popen(
            [sys.executable, "-m", "memself", "sync"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0, span))
        child.send_signal(signal.SIGKILL)
        if child.wait() == -signal.SIGKILL:
            killed += 1
        else:
            span *= 0.7
        i += 1
    for step in range(3):
        a.sync(minute + 1 + step)
        b.sync(minute + 1 + step)
    for machine in (a, b):
        assert machine.store.quarantined() == []
        texts = Counter(m.text for m in machine.store.all())
        assert set(texts) == expected, f"seed {seed}"
        assert max(texts.values()) == 1, f"seed {seed}"
        for name in ("rule.jsonl", "project.jsonl"):
            if machine.paths.group_file(name[:-6]).exists():
                original_reads(machine.paths.group_file(name[:-6]))
        trash_ids = Counter(e.memory.id for e in machine.store.trash_entries())
        assert not trash_ids or max(trash_ids.values()) == 1
        assert strict_lines(machine.paths.sync_dir / "quarantine.jsonl") == []
    assert a.snapshot().memories == b.snapshot().memories
    assert len([ln for ln in remote_file(remote, "rule.jsonl").splitlines() if ln]) == len(expected)
    for mem_id, text in replaced.items():
        assert a.texts()[mem_id] == text


def test_sync_killed_at_random_points_loses_and_duplicates_nothing(tmp_path):
    _kill_loop(tmp_path, kills=8, seed=int(os.environ.get("MEMSELF_KILL_SEED", "1")))


@pytest.mark.full
def test_sync_killed_200_times_loses_and_duplicates_nothing(tmp_path):
    _kill_loop(tmp_path, kills=200, seed=int(os.environ.get("MEMSELF_KILL_SEED", "7")))
