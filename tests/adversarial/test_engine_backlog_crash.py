"""Accidents while a real engine (the offline model) encodes a large backlog: SIGKILLed at
several points, the index on disk stays readable and keeps every row written, and a new engine
serves those at once and encodes only the rest; memories added and deleted meanwhile end up
exactly as the store says."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timezone

import numpy as np
import pytest

from memself.engine.client import call_engine
from memself.index.files import HEADER, read_state
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.backlog_helpers import (
    backlog_of,
    engine_home,
    start_engine,
    wait_status,
    write_unencoded_store,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
__all__ = ["engine_home"]  # a fixture: pytest finds it here

# The real model's backlog must still be running when the test kills or edits: that takes a
# backlog long enough for a fast machine and minutes on a loaded one, so the full group.
# tests/test_engine_backlog.py covers the same steps on a scripted encoder, every run.
pytestmark = pytest.mark.full

# Three kills each wait for an index write (every couple of seconds) and then up to 1.6 s more:
# on a quiet machine an 800-memory backlog was done by the third, so the store is large enough to
# outlast them there; on a loaded one the final wait has its own long timeout.
COUNT = 3000


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    for _ in range(1000):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child: gone once signal 0 fails
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.01)
    raise AssertionError(f"engine {pid} survived SIGKILL")


def _rows(paths: DataPaths) -> dict[str, np.ndarray]:
    state = read_state(paths.index_dir, mmap=False)
    assert not state.problem, state.problem
    return {mid: np.array(state.vectors[state.row(mid)]) for mid in state.id_list()}


def test_killed_mid_backlog_a_new_engine_keeps_every_written_row_and_encodes_the_rest(
    engine_home: DataPaths,
) -> None:
    ids = set(write_unencoded_store(engine_home, COUNT))
    status = start_engine(engine_home)
    kept: dict[str, np.ndarray] = {}
    # Right after a write, and part way to the next one (mid-chunk or mid-write).
    for delay in (0.0, 0.7, 1.6):
        before = len(kept)
        status = wait_status(engine_home, lambda s, n=before: s["service"].get("indexed", 0) > n)
        time.sleep(delay)
        _kill(status["pid"])
        rows = _rows(engine_home)
        assert set(rows) <= ids
        for mid, vector in kept.items():  # nothing written before is lost or changed
            assert np.array_equal(rows[mid], vector)
        assert len(rows) < COUNT, "the backlog finished before the kill: nothing was tested"
        kept = rows
        status = start_engine(engine_home)
        assert status["service"]["indexed"] >= len(kept)  # served at once, not encoded again
        assert backlog_of(status) is not None
    wait_status(
        engine_home, lambda s: backlog_of(s) is None and s["service"].get("indexed") == COUNT, timeout_s=900
    )
    final = _rows(engine_home)
    assert set(final) == ids
    for mid, vector in kept.items():
        assert np.array_equal(final[mid], vector)
    # The generations the kills interrupted are gone: one header, one set of arrays.
    names = sorted(p.name for p in engine_home.index_dir.iterdir() if not p.name.startswith("."))
    assert len(names) == 4 and HEADER in names


def test_memories_added_and_deleted_while_the_backlog_runs_end_up_exactly_indexed(
    engine_home: DataPaths,
) -> None:
    ids = write_unencoded_store(engine_home, COUNT)
    start_engine(engine_home)
    wait_status(engine_home, lambda s: s["service"].get("indexed", 0) > 0)
    store = MemoryStore(engine_home)
    added = [
        store.create("发布前要先在 staging 跑完整回归，再找值班同学确认", "project", NOW),
        store.create("前端组件库统一用 pnpm 安装，不要混用 npm", "project", NOW),
    ]
    store.delete([ids[-1]], NOW)
    # The next request sees the change: the new memories are encoded before it is answered,
    # while the backlog is still running.
    question = {"text": "前端组件库用什么包管理器安装", "k": 1}
    nearest = call_engine(engine_home, "nearest", question, timeout_s=60)
    assert nearest["items"][0]["id"] == added[1].id
    during = wait_status(engine_home, lambda s: "indexed" in s["service"])
    assert backlog_of(during) is not None
    wait_status(
        engine_home,
        lambda s: backlog_of(s) is None and s["service"].get("indexed") == COUNT + 1,
        timeout_s=900,
    )
    final = _rows(engine_home)
    assert set(final) == {m.id for m in store.all()}
    assert ids[-1] not in final and {m.id for m in added} <= set(final)
