"""Judges the warm engine starts (a forwarded prompt hook runs the core, and so the judge spawn,
inside the engine) must be waited for: each unreaped judge stays a zombie for as long as the
engine lives, one per judged prompt."""

from __future__ import annotations

import glob
import json
import time

import pytest

from memself.engine.client import call_engine
from memself.judge import jobs
from memself.paths import DataPaths
from tests.support.hookproc import hook_data, hook_runs, run_entry
from tests.support.judge_helpers import configure
from tests.support.judge_server import not_memory, running_judge, sse

__all__ = ["hook_data"]

PROMPTS = 30


def children(pid: int) -> list[int]:
    found: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with open(path, encoding="ascii") as handle:
            found += [int(child) for child in handle.read().split()]
    return found


def zombies(pid: int) -> list[int]:
    dead = []
    for child in children(pid):
        try:
            with open(f"/proc/{child}/stat", encoding="utf-8", errors="replace") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            dead.append(child)
    return dead


def prompt_payload(i: int) -> bytes:
    prompt = f"记住：第 {i} 号服务的端口固定为 {8000 + i}"
    return json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "sess-zombies",
            "prompt": prompt,
            "prompt_id": f"p-{i}",
            "cwd": "/tmp",
        },
        ensure_ascii=False,
    ).encode()


def test_engine_leaves_no_zombie_judges(hook_data: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = hook_data
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.hookcore_service:make")
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(*[sse(not_memory()) for _ in range(PROMPTS)])
        engine_pid = call_engine(paths, "echo", {}, timeout_s=30)["pid"]
        for i in range(PROMPTS):
            proc = run_entry("claude", prompt_payload(i))
            assert proc.rc == 0, proc.stderr[-2000:]
        runs = [r for r in hook_runs(paths) if r["kind"] == "prompt_submit"]
        # Every prompt ran inside the engine: the engine, not a hook process, spawned the judges.
        assert [r.get("note") for r in runs] == ["engine"] * PROMPTS
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = [jobs.read_job(p) for p in paths.side_dir.glob("s_*.json")]
            if len(found) == PROMPTS and all(j and j["status"] != jobs.RUNNING for j in found):
                break
            time.sleep(0.2)
        assert len(judge.requests) == PROMPTS
    assert {j["reason"] for j in found if j} == {"not-memory"}
    # The judges are gone; give the engine a moment (it reaps between requests) to wait for them.
    deadline = time.monotonic() + 5
    while zombies(engine_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = zombies(engine_pid)
    assert left == [], f"{len(left)} zombie judges under engine {engine_pid}"
