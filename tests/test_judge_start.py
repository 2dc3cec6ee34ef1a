"""Starting a judge from the prompt hook (checklist 15, 16) and the real detached spawn."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memself.config import load_config, set_config_value
from memself.judge import jobs
from memself.judge.credentials import load_or_create_session_secret
from memself.judge.proposal_id import proposal_id
from memself.judge.start import maybe_start_judge, spawn_judge
from memself.paths import DataPaths
from tests.support import foreign
from tests.support.judge_helpers import NOW, configure
from tests.support.judge_server import remember, running_judge, sse

PROMPT = "记住：以后回答都用中文"


def start(
    paths: DataPaths,
    prompt: str = PROMPT,
    session: str = "sess-1",
    turn: str = "g1",
    host: str = "cursor",
    spawned: list | None = None,
) -> str | None:
    record = spawned if spawned is not None else []
    return maybe_start_judge(
        paths,
        load_config(paths),
        host,
        session,
        turn,
        prompt,
        NOW,
        spawn=lambda p, run_lock: record.append(p),
    )


@pytest.fixture
def paths() -> DataPaths:
    p = DataPaths.default()
    configure(p, "http://127.0.0.1:9/v1")
    return p


def test_retry_same_id_one_spawn_even_after_finish_checklist_15(paths) -> None:
    spawned: list = []
    first = start(paths, spawned=spawned)
    assert first is not None and first.startswith("s_")
    assert start(paths, spawned=spawned) == first
    assert len(spawned) == 1 and len(list(paths.side_dir.glob("s_*.json"))) == 1
    assert stat.S_IMODE(paths.session_secret.stat().st_mode) == 0o600
    jobs.finish(paths, first, NOW, jobs.NONE, "not-memory")
    assert start(paths, spawned=spawned) == first and len(spawned) == 1  # tombstone
    second = start(paths, turn="g2", spawned=spawned)
    assert second != first and len(spawned) == 2


def test_redacted_prompt_stored_raw_prompt_hashed(paths) -> None:
    token = "sk-" + "Zx9" * 16
    raw = f"记住：测试环境的 OpenAI key 是 {token}"
    sid = start(paths, raw)
    stored = jobs.load_job(paths, sid)["prompt"]
    assert token not in stored and "[已隐去]" in stored
    secret = load_or_create_session_secret(paths)
    assert sid == proposal_id("cursor", "sess-1", "g1", raw, secret)
    assert sid != proposal_id("cursor", "sess-1", "g1", stored, secret)


def test_no_session_key_fails_closed_checklist_16(paths) -> None:
    spawned: list = []
    assert start(paths, session="", spawned=spawned) is None
    assert spawned == [] and not paths.side_dir.exists()
    assert "旁路分析缺少稳定会话 ID，已跳过" in paths.log_file.read_text()


@pytest.mark.parametrize(
    "prompt",
    [
        "MEMORY_CONFIRM_V1\n插件已直接写入记忆。",
        "memory-self-evolution 捕捉到了新的记忆：\n结果：",
        "<question_answer>落成</question_answer>",
        "好的",
        "/compact",
    ],
)
def test_filtered_prompts_start_nothing(paths, prompt: str) -> None:
    spawned: list = []
    assert start(paths, prompt, spawned=spawned) is None
    assert spawned == [] and not paths.side_dir.exists()


@pytest.mark.parametrize("change", ["disabled", "no-base", "no-model", "no-key", "legacy"])
def test_not_configured_starts_nothing(paths, change: str) -> None:
    if change == "disabled":
        set_config_value(paths, "enabled", "false")
    elif change == "no-base":
        set_config_value(paths, "sideApiBase", "")
    elif change == "no-model":
        set_config_value(paths, "sideApiModel", "")
    elif change == "no-key":
        paths.side_secret.unlink()
    else:
        data = json.loads(paths.config.read_text())
        data["sideJudge"] = False
        paths.config.write_text(json.dumps(data))
    spawned: list = []
    assert start(paths, spawned=spawned) is None
    assert spawned == [] and not paths.side_dir.exists()


def test_two_identical_hooks_in_two_processes_spawn_one_judge(paths, tmp_path: Path) -> None:
    record = tmp_path / "spawns.txt"
    script = textwrap.dedent(f"""
        import sys, time
        from datetime import datetime, timezone
        from pathlib import Path
        from memself.config import load_config
        from memself.paths import DataPaths
        from memself.judge.start import maybe_start_judge
        paths = DataPaths.default()
        config = load_config(paths)
        go = float(sys.argv[1])
        while time.time() < go:
            pass
        def spawn(p, run_lock):
            with open({str(record)!r}, "a") as f:
                f.write(str(p) + "\\n")
        sid = maybe_start_judge(paths, config, "claude", "sess-x", "p-1", {PROMPT!r},
                                datetime(2026, 11, 30, 10, tzinfo=timezone.utc), spawn=spawn)
        print(sid)
    """)
    go = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, go], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        for _ in range(4)
    ]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(ids) == 1 and next(iter(ids)).startswith("s_")
    assert len(record.read_text().splitlines()) == 1
    assert len(list(paths.side_dir.glob("s_*.json"))) == 1


def test_real_detached_judge_runs_to_ready() -> None:
    paths = DataPaths.default()
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        judge.script(sse(remember("回答问题时一律使用中文")))
        judge.answering.clear()  # the judge gets no answer until the hook's part has returned
        sid = maybe_start_judge(paths, load_config(paths), "claude", "sess-r", "p-r", PROMPT, NOW)
        assert sid is not None
        assert jobs.load_job(paths, sid)["status"] == "running"  # the hook never waits for the judge
        judge.answering.set()
        deadline = time.monotonic() + 60
        job = jobs.load_job(paths, sid)
        while job["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            job = jobs.load_job(paths, sid)
    assert job["status"] == "ready", job
    assert job["proposal"]["text"] == "回答问题时一律使用中文"
    assert len(judge.requests) == 1


def test_spawn_is_detached_and_cheap() -> None:
    paths = DataPaths.default()
    jobs.ensure_side_dir(paths)
    missing = paths.side_dir / ("s_" + "0" * 64 + ".json")
    costs = []
    pids = []
    for _ in range(5):
        started = time.perf_counter()
        pids.append(spawn_judge(missing))  # no such job: the judge exits at once, on its own
        costs.append(time.perf_counter() - started)
    for pid in pids:
        # Its own session: the host's process group can't kill it. Windows has no sessions: the
        # foreign mode's child stays in ours (Windows' flags are checked in test_platform_layer).
        assert (os.getsid(pid) == pid) != foreign.active()
    for pid in pids:
        os.waitpid(pid, 0)
    costs.sort()
    assert costs[2] < 0.1, costs  # median; measured ~3 ms, budget 10 ms (not a timing gate)
