"""A session start begins ``memself sync`` detached: the hook returns at once, the sync happens
in the background, and a sync run lately is not started again."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import pytest

from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from memself.sync import background
from tests.support.hookproc import hook_data, hook_runs, run_entry
from tests.support.sync_helpers import Machine, at, bare_repo, remote_file

__all__ = ["hook_data"]


def _session_start(host: str = "claude") -> None:
    adapter = HOSTS[host]
    payload = {
        "hook_event_name": adapter.EVENT_NAMES[EventKind.SESSION_START],
        "session_id": "s1",
        "cwd": "/tmp",
    }
    proc = run_entry(host, json.dumps(payload).encode())
    assert proc.rc == 0, proc.stderr


def test_session_start_syncs_in_the_background(tmp_path, hook_data: DataPaths):
    remote = bare_repo(tmp_path / "memories.git")
    machine = Machine(hook_data.root, remote)
    machine.init()
    machine.sync(0)
    machine.add("会话开始时在后台同步这一条记忆", 1)
    os.remove(hook_data.sync_dir / "state.json")  # due now
    _session_start()
    assert [r["kind"] for r in hook_runs(hook_data)] == ["session_start"]
    deadline = time.monotonic() + 60
    while "会话开始时在后台同步这一条记忆" not in remote_file(remote, "rule.jsonl"):
        assert time.monotonic() < deadline, "the background sync never pushed"
        time.sleep(0.2)


def test_not_due_when_synced_lately_or_not_set_up(tmp_path):
    paths = DataPaths(tmp_path / "data")
    assert not background.due(paths, at(0))  # sync never set up: nothing to start
    remote = bare_repo(tmp_path / "memories.git")
    machine = Machine(paths.root, remote)
    machine.init()
    assert background.due(paths, at(0))
    machine.sync(0)
    assert not background.due(paths, at(0) + background.MIN_INTERVAL - timedelta(seconds=1))
    assert background.due(paths, at(0) + background.MIN_INTERVAL)


def test_the_engine_syncs_once_writes_settle_and_then_stops(tmp_path):
    remote = bare_repo(tmp_path / "memories.git")
    machine = Machine(tmp_path / "data", remote)
    machine.init()
    machine.sync(0)
    task = background.SyncAfterWrites(machine.paths, delay_s=5)

    def settle(clock: float) -> None:
        task.tick(clock)
        while task._running is not None and task._running.wait(timeout=60) is None:
            pass

    task.tick(0)  # the engine starts: nothing changed since
    assert task.spawned == 0
    machine.add("写入停下来之后引擎在后台同步", 1)
    task.tick(1)
    task.tick(4)
    assert task.spawned == 0  # not settled yet
    settle(6.5)
    assert task.spawned == 1
    assert "写入停下来之后引擎在后台同步" in remote_file(remote, "rule.jsonl")
    for clock in (10, 20, 30):
        settle(clock)
    assert task.spawned == 1  # its own sync wrote nothing: no loop


def test_the_engine_does_nothing_when_sync_is_not_set_up(tmp_path):
    paths = DataPaths(tmp_path / "data")
    task = background.SyncAfterWrites(paths, delay_s=0, spawn=lambda p: pytest.fail("spawned"))
    for clock in (0, 1, 2):
        task.tick(clock)
    assert task.spawned == 0
