"""The engine's encoding backlog on a scripted encoder: written and published in steps, paused
while a request is served, following a new plan (deleted memories dropped, new ones encoded) and
a model change, with honest progress."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from memself.index.files import read_state
from memself.index.sync import VectorIndex
from memself.paths import DataPaths
from memself.warm.backlog import Backlog
from tests.test_vector_index import FakeEncoder


@dataclass
class Mem:
    id: str
    text: str


class GatedEncoder(FakeEncoder):
    """A ``FakeEncoder`` whose calls wait for ``gate`` (set by the test) and announce themselves."""

    def __init__(self, model_id: str = "fake-a") -> None:
        super().__init__(model_id)
        self.gate = threading.Event()
        self.called = threading.Event()

    def encode_passages(self, texts):
        self.called.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().encode_passages(texts)


@pytest.fixture
def paths(tmp_path) -> DataPaths:
    paths = DataPaths(tmp_path / "data")
    paths.ensure()
    return paths


@pytest.fixture
def published() -> Iterator[list[int]]:
    yield []


def memories(n: int, prefix: str = "m") -> list[Mem]:
    return [Mem(f"{prefix}{i:03d}", f"{prefix} 号记忆第 {i} 条" + "长" * (i % 5)) for i in range(n)]


def start(paths: DataPaths, published: list[int], **kwargs) -> Backlog:
    return Backlog(paths, lambda writer: published.append(len(writer)), **kwargs)


def wait_idle(backlog: Backlog) -> None:
    for _ in range(3000):
        if not backlog.active():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the backlog never finished")


def test_written_and_published_in_steps_until_every_memory_has_its_vector(paths, published) -> None:
    encoder = FakeEncoder()
    index = VectorIndex.for_paths(paths)
    mems = memories(40)
    plan = index.plan(mems, encoder)
    assert len(plan.todo) == 40
    backlog = start(paths, published, chunk=8, min_interval_s=0.0)
    with backlog.write_lock:
        index.commit(plan, encoder)
        backlog.assign(plan, encoder, leave_out=set())
    wait_idle(backlog)
    backlog.close()
    assert published == sorted(published) and len(published) >= 2 and published[-1] == 40
    state = read_state(paths.index_dir, mmap=False)
    assert sorted(state.id_list()) == [m.id for m in mems]
    for m in mems[:5]:
        assert np.allclose(state.vectors[state.row(m.id)], encoder._vec(m.text), atol=1e-6)
    assert backlog.progress() is None
    assert index.plan(mems, encoder).current


def test_no_chunk_starts_while_a_request_is_served(paths, published) -> None:
    encoder = FakeEncoder()
    index = VectorIndex.for_paths(paths)
    plan = index.plan(memories(10), encoder)
    backlog = start(paths, published, chunk=4, min_interval_s=0.0)
    with backlog.serving():
        backlog.assign(plan, encoder, leave_out=set())
        threading.Event().wait(0.3)
        assert encoder.seen == []
        assert backlog.progress() == {"done": 0, "total": 10, "rate_per_s": 0.0, "eta_s": None}
    wait_idle(backlog)
    backlog.close()
    assert len(encoder.seen) == 10


def test_a_new_plan_drops_a_deleted_memory_and_encodes_a_new_one(paths, published) -> None:
    encoder = GatedEncoder()
    index = VectorIndex.for_paths(paths)
    first = memories(12)
    backlog = start(paths, published, chunk=4, min_interval_s=0.0)
    backlog.assign(index.plan(first, encoder), encoder, leave_out=set())
    assert encoder.called.wait(10)  # the first chunk is in the encoder now
    gone = first[0].id  # in the chunk being encoded: its vector must still not be written
    second = [m for m in first if m.id != gone] + [Mem("new1", "后来加的一条记忆")]
    with backlog.write_lock:
        backlog.assign(index.plan(second, encoder), encoder, leave_out=set())
    encoder.gate.set()
    wait_idle(backlog)
    backlog.close()
    state = read_state(paths.index_dir, mmap=False)
    assert sorted(state.id_list()) == sorted(m.id for m in second)
    assert encoder.seen.count(first[5].text) == 1  # queued by both plans, encoded once


def test_a_model_change_never_writes_the_old_models_vectors(paths, published) -> None:
    old, new = GatedEncoder("fake-a"), FakeEncoder("fake-b")
    index = VectorIndex.for_paths(paths)
    mems = memories(12)
    backlog = start(paths, published, chunk=4, min_interval_s=0.0)
    backlog.assign(index.plan(mems, old), old, leave_out=set())
    assert old.called.wait(10)
    with backlog.write_lock:
        plan = index.plan(mems, new)
        index.commit(plan, new)
        backlog.assign(plan, new, leave_out=set())
    old.gate.set()
    wait_idle(backlog)
    backlog.close()
    state = read_state(paths.index_dir, mmap=False)
    assert state.model_id == "fake-b" and len(state) == 12
    for m in mems:
        assert np.allclose(state.vectors[state.row(m.id)], new._vec(m.text), atol=1e-6)


def test_progress_counts_rate_and_time_left_on_the_given_clock(paths, published) -> None:
    now = [100.0]
    encoder = GatedEncoder()
    index = VectorIndex.for_paths(paths)
    backlog = start(paths, published, chunk=5, min_interval_s=1000.0, clock=lambda: now[0])
    backlog.assign(index.plan(memories(20), encoder), encoder, leave_out=set())
    assert encoder.called.wait(10)
    assert backlog.progress() == {"done": 0, "total": 20, "rate_per_s": 0.0, "eta_s": None}
    now[0] = 110.0
    with backlog.serving():  # holds the next chunk back once the first is counted
        encoder.gate.set()
        for _ in range(3000):
            progress = backlog.progress()
            if progress is not None and progress["done"] == 5:
                break
            threading.Event().wait(0.01)
        assert progress == {"done": 5, "total": 20, "rate_per_s": 0.5, "eta_s": 30.0}
    wait_idle(backlog)
    backlog.close()
    assert len(read_state(paths.index_dir, mmap=False)) == 20


def test_rows_of_a_failed_write_are_kept_and_written_by_a_later_one(paths, published, monkeypatch) -> None:
    """A full disk fails a write: its rows stay in hand and land with a later write, with no
    reload of the memories needed."""
    encoder = FakeEncoder()
    index = VectorIndex.for_paths(paths)
    mems = memories(24)
    failures = []
    real = VectorIndex.add_encoded

    def full_disk_once(self, wanted, fresh, enc):
        if not failures:
            failures.append(len(fresh))
            raise OSError(28, "No space left on device")
        return real(self, wanted, fresh, enc)

    monkeypatch.setattr(VectorIndex, "add_encoded", full_disk_once)
    backlog = start(paths, published, chunk=4, min_interval_s=0.05)
    backlog.assign(index.plan(mems, encoder), encoder, leave_out=set())
    wait_idle(backlog)
    backlog.close()
    assert failures and failures[0] > 0
    assert sorted(read_state(paths.index_dir, mmap=False).id_list()) == [m.id for m in mems]
    assert "index-backlog-write-failed" in paths.log_file.read_text()


def test_a_plan_that_only_adds_rows_writes_nothing_until_they_are_encoded(paths) -> None:
    """A reload during a backlog (the store changed) must not rewrite the whole index for
    nothing; a deleted memory's row is dropped at once."""
    encoder = FakeEncoder()
    index = VectorIndex.for_paths(paths)
    mems = memories(10)
    index.sync(mems[:6], encoder)
    generation = index.generation
    assert not index.commit(index.plan(mems, encoder), encoder).written
    assert index.generation == generation
    dropped = index.commit(index.plan(mems[1:], encoder), encoder)
    assert dropped.written and dropped.removed == 1 and index.generation != generation
    assert sorted(index.ids) == [m.id for m in mems[1:6]]
