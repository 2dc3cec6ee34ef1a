"""A recall that never reached the model earns no reward.

The hook gives the warm engine a bounded time (it must answer the host in time). When the engine
is slower, the hook answers without recall (logged ``local:timeout``), but the engine went on,
finished the recall and added +0.05 to every hit: confidence grew for text the model never saw.
The original rewarded only what it injected. Both ways a prompt reaches the engine are covered:
the whole hook forwarded to it, and the recall asked of it by a hook that runs in its own process
(a hook command without ``--agent``, whose host is guessed, runs that way).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time

import pytest

from memself.engine.client import EngineClient, EngineRequestError, ensure_started
from memself.hook.command import hook_command
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, by_id, days, make_store, record, write_records
from tests.support.hookproc import hook_data, hook_runs
from tests.support.slow_recall_service import DELAY_ENV, OP_SETTLE

__all__ = ["hook_data"]

RULE = "回答一律使用中文，代码注释也用中文"
PROMPT = {
    "hook_event_name": "UserPromptSubmit",
    "session_id": "s-reward",
    "prompt": "帮我看看这个函数为什么返回空列表",
}
# The whole hook forwarded to the engine, and a hook run in its own process asking for recall.
ARGV = {"forwarded": ["--agent", "codebuddy"], "own-process": []}


@pytest.fixture
def slow_engine(hook_data: DataPaths, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.slow_recall_service:make")

    def start(delay_s: float) -> DataPaths:
        monkeypatch.setenv(DELAY_ENV, str(delay_s))
        write_records(make_store(hook_data.root), "rule", [record("r1", RULE, 0.7, last=T0 - days(3))])
        ensure_started(hook_data)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if EngineClient(hook_data).ping(0.3).get("ready"):
                    return hook_data
            except EngineRequestError:
                pass
            time.sleep(0.05)
        raise AssertionError("the engine did not start")

    return start


def _hook(argv: list[str]) -> dict:
    base = hook_command("codebuddy")[:-2]
    proc = subprocess.run(
        [*base, *argv],
        input=json.dumps(PROMPT, ensure_ascii=False).encode("utf-8"),
        capture_output=True,
        timeout=30,
        env=dict(os.environ),
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def _settle(paths: DataPaths) -> None:
    """Wait until the engine has finished the slow recall (service ops run one at a time)."""
    EngineClient(paths).request(OP_SETTLE, {}, timeout_s=20)
    time.sleep(0.5)  # and whatever it does once the reply is out


@pytest.mark.parametrize("way", list(ARGV))
def test_a_recall_the_hook_gave_up_on_earns_no_reward(slow_engine, way: str) -> None:
    paths = slow_engine(4.0)
    answer = _hook(ARGV[way])
    assert RULE not in json.dumps(answer, ensure_ascii=False)  # the host got no recall
    assert hook_runs(paths)[-1]["note"].endswith("local:timeout" if way == "forwarded" else "guessed-host")
    _settle(paths)
    memory = by_id(MemoryStore(paths), "r1")
    assert memory.confidence == 0.7, "rewarded for a recall the model never saw"
    assert memory.lastSeen.startswith((T0 - days(3)).date().isoformat())


@pytest.mark.parametrize("way", list(ARGV))
def test_a_recall_that_reached_the_host_is_rewarded_once(slow_engine, way: str) -> None:
    paths = slow_engine(0.0)
    answer = _hook(ARGV[way])
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert RULE in context and "置信度 0.75" in context  # shown as it is after the reward
    deadline = time.monotonic() + 5
    while by_id(MemoryStore(paths), "r1").confidence != 0.75 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert by_id(MemoryStore(paths), "r1").confidence == 0.75
    _hook(ARGV[way])  # the same day again: recalled, shown, no second reward
    _settle(paths)
    assert by_id(MemoryStore(paths), "r1").confidence == 0.75
