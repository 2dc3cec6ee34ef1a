"""A judge that dies mid-call (OOM killer, a kill by the user, a crash) must not leave its job
"running" for Stop to wait on: every Stop of the session would otherwise wait the full
``sideWaitMs`` for a process that no longer exists."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

from memself.config import load_config
from memself.judge import jobs, runlock
from memself.judge.start import maybe_start_judge, spawn_judge
from memself.paths import DataPaths
from tests.support.hookproc import hook_data, run_entry
from tests.support.judge_helpers import configure
from tests.support.judge_server import Reply, running_judge

__all__ = ["hook_data"]

PROMPT = "记住：以后回答都用中文"
SESSION = "sess-dead-judge"


def stop_payload() -> bytes:
    return json.dumps({"hook_event_name": "Stop", "session_id": SESSION, "stop_hook_active": False}).encode()


def test_stop_does_not_wait_for_a_killed_judge(hook_data: DataPaths) -> None:
    paths = hook_data
    pids: list[int] = []
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(Reply("hang"))  # the judge sits in its HTTP call until it is killed
        sid = maybe_start_judge(
            paths,
            load_config(paths),
            "claude",
            SESSION,
            "p-1",
            PROMPT,
            datetime.now(timezone.utc),
            spawn=lambda *args: pids.append(spawn_judge(*args)),
        )
        assert sid is not None and len(pids) == 1
        deadline = time.monotonic() + 60
        while not judge.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert judge.requests, "the judge never called the endpoint"
        assert runlock.probe(paths, sid) == runlock.ALIVE  # the judge holds its job's run lock
        os.kill(pids[0], signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pids[0], 0)
        assert jobs.load_job(paths, sid)["status"] == jobs.RUNNING  # what the judge left
        started = time.monotonic()
        proc = run_entry("claude", stop_payload(), timeout=60)
        elapsed = time.monotonic() - started
    assert proc.rc == 0
    # sideWaitMs is 12 s: a Stop that waited for the dead judge would take all of it (the margin
    # below it is for a loaded machine's process start).
    assert elapsed < 10.0, f"Stop took {elapsed:.1f} s"
    job = jobs.load_job(paths, sid)
    assert (job["status"], job["reason"]) == (jobs.NONE, "judge-died"), job


def judge_pids(job_file: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if b"side-run" in argv and job_file.encode() in argv:
            pids.append(int(entry))
    return pids


def test_a_judge_started_by_the_real_prompt_hook_holds_its_run_lock(hook_data: DataPaths) -> None:
    """The hook process as hosts run it (``python -I -S``, few descriptors open, so the run
    lock may well be fd 3 itself) hands the lock to the judge it spawns."""
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(Reply("hang"))
        payload = json.dumps(
            {
                "hook_event_name": "UserPromptSubmit",
                "session_id": SESSION,
                "prompt": PROMPT,
                "prompt_id": "p-2",
                "cwd": "/tmp",
            },
            ensure_ascii=False,
        ).encode()
        assert run_entry("claude", payload).rc == 0
        [job_file] = [str(p) for p in paths.side_dir.glob("s_*.json")]
        sid = jobs.read_job(Path(job_file))["id"]
        deadline = time.monotonic() + 60
        while not judge.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert judge.requests, "the judge never called the endpoint"
        assert runlock.probe(paths, sid) == runlock.ALIVE  # the hook exited; the judge holds it
        [pid] = judge_pids(job_file)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while runlock.probe(paths, sid) != runlock.DEAD and time.monotonic() < deadline:
            time.sleep(0.02)
        assert runlock.probe(paths, sid) == runlock.DEAD
        proc = run_entry("claude", stop_payload(), timeout=60)
    assert proc.rc == 0
    job = jobs.load_job(paths, sid)
    assert (job["status"], job["reason"]) == (jobs.NONE, "judge-died"), job
