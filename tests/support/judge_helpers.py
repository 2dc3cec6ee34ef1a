"""Builders shared by the judge tests: a fake judge server (the ``judge`` fixture), a configured
data dir, a deterministic nearest, the judge's run in-process on a fixed clock, jobs that are
running or ready with a proposal, and a Stop on a clock the test controls."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memself.config import load_config, set_config_value
from memself.hosts import HOSTS
from memself.judge import jobs, runlock
from memself.judge.credentials import write_api_key
from memself.judge.followup import followup
from memself.judge.start import maybe_start_judge
from memself.judge.worker import run_job
from memself.paths import DataPaths
from memself.platform import locks
from memself.store.memory_store import MemoryStore
from memself.store.records import Memory
from tests.support.judge_server import FakeJudge, running_judge

API_KEY = "sk-fake-0123456789abcdefSECRET"
NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)


def configure(paths: DataPaths, url: str, confirm: bool = True) -> None:
    paths.ensure()
    set_config_value(paths, "sideApiBase", url)
    set_config_value(paths, "sideApiModel", "fake-judge")
    set_config_value(paths, "confirm", "true" if confirm else "false")
    write_api_key(paths, API_KEY, url)


@pytest.fixture
def judge() -> Iterator[FakeJudge]:
    """A fake judge on a free port of 127.0.0.1 for one test (import it to use it)."""
    with running_judge() as server:
        yield server


def judged_data(judge: FakeJudge, confirm: bool) -> tuple[DataPaths, MemoryStore]:
    """The test's data dir configured for ``judge``, and its store."""
    paths = DataPaths.default()
    configure(paths, judge.url, confirm)
    return paths, MemoryStore(paths)


def run_judge_job(paths: DataPaths, store: MemoryStore, sid: str, nearest=None, timeout: float = 5.0):
    """The judge process's body, in-process, three seconds after ``NOW``."""
    return run_job(
        jobs.job_path(paths, sid),
        clock(NOW + timedelta(seconds=3)),
        nearest or overlap_nearest(store),
        store,
        load_config(paths),
        timeout=timeout,
    )


def overlap_nearest(store: MemoryStore):
    """Character-bigram overlap: deterministic and good enough where vectors are not under test."""

    def grams(text: str) -> set[str]:
        return {text[i : i + 2] for i in range(len(text) - 1)}

    def nearest(text: str, k: int, workspace: str) -> Sequence[tuple[Memory, float]]:
        query = grams(text)
        scored = []
        for memory in store.all():
            if not memory.active or not memory.visible_in(workspace):
                continue
            other = grams(memory.text)
            score = len(query & other) / max(1, len(query | other))
            scored.append((memory, score))
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored[:k]

    return nearest


# Run locks held on behalf of judges that "run" without a process: sessionID -> (data dir,
# descriptor). Those of an earlier test's data dir are closed by the next ``start_job``.
_RUNNING: dict[str, tuple[Path, int]] = {}


def start_job(
    paths: DataPaths,
    prompt: str,
    host: str = "claude",
    session: str = "sess-1",
    turn: str = "turn-1",
    now: datetime = NOW,
    workspace: str = "",
) -> str:
    """A running job whose judge counts as alive (its run lock stays held) until
    ``judge_exits``; the tests run the judge in-process or finish the job themselves.
    ``workspace`` is the turn's workspace key ("" for none)."""
    spawned: list[str] = []
    for other in [s for s, (root, _) in _RUNNING.items() if root != paths.root]:
        judge_exits(other)

    def spawn(path: Path, run_lock: int) -> None:
        spawned.append(str(path))
        if locks.inherited():
            _RUNNING[path.stem] = (paths.root, os.dup(run_lock))  # a duplicate shares the lock
            return
        # Where a child would not inherit the hook's lock (Windows), the judge takes its own.
        held = runlock.judge_lock(paths, path.stem)
        assert held is not None
        _RUNNING[path.stem] = (paths.root, held)

    sid = maybe_start_judge(
        paths, load_config(paths), host, session, turn, prompt, now, spawn=spawn, workspace=workspace
    )
    assert sid is not None and spawned == [str(jobs.job_path(paths, sid))]
    return sid


def judge_exits(sid: str) -> None:
    """What the end of a judge process does to its job's run lock."""
    held = _RUNNING.pop(sid, None)
    if held is not None:
        os.close(held[1])


def clock(start: datetime = NOW):
    return lambda: start


class Clock:
    def __init__(self, start: datetime = NOW) -> None:
        self.now = start
        self.sleeps = 0

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += timedelta(seconds=seconds)


def proposal(
    text: str, action: str = "create", category: str = "rule", target=None, merged: str = ""
) -> dict:
    return {
        "text": text,
        "evidence": "原话",
        "category": category,
        "action": action,
        "targetId": target.id if target else "",
        "targetText": target.text if target else "",
        "mergedText": merged,
        "score": 0.61 if target else None,
    }


def ready(
    paths: DataPaths,
    prompt: str,
    prop: dict,
    host: str = "claude",
    session: str = "sess-1",
    turn: str = "t1",
    at: datetime = NOW,
    workspace: str = "",
) -> str:
    sid = start_job(paths, prompt, host, session, turn, at, workspace)
    jobs.finish(paths, sid, at, jobs.READY, proposal=prop)
    return sid


def stop(paths, store, host="claude", session="sess-1", clock=None, keep=False):
    clock = clock or Clock()
    popup = HOSTS[host].POPUP
    return followup(
        paths, store, load_config(paths), host, session, popup, clock, clock.sleep, keep_model_text=keep
    )
