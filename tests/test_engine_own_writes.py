"""The engine's own recall rewards keep its parsed memories current instead of invalidating them.

Every delivered recall writes a reward (+0.05 confidence) to the group file. Before, the next
prompt saw a new file version, re-read every memory and re-matched them against the index; with
a large store that cost the next prompt seconds, past the hook's deadline. A write of the engine's
own that changes only fields recall does not score is now copied onto the cached memories; any
other change (another process's write, a new text) still makes the next prompt re-read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.warm.service import CachedReadStore, RecallService
from tests.support.helpers import T0, days, make_store, record, write_records


@pytest.fixture
def paths(tmp_path: Path) -> DataPaths:
    store = make_store(tmp_path / "home")
    write_records(
        store,
        "project",
        [
            record(f"p{i}", f"项目事实第 {i} 条：服务 svc-{i} 的灰度开关叫 flag_{i}", 0.6, last=T0 - days(2))
            for i in range(5)
        ],
    )
    write_records(store, "rule", [record("r1", "回答一律使用中文，代码注释也用中文", 0.7, last=T0 - days(2))])
    return store.paths


def test_an_own_reward_is_applied_to_the_cached_memories(
    paths: DataPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CachedReadStore(paths)
    cached = {m.id: m for m in store.read_group("project")}
    told: list[tuple[str, object, object]] = []
    store.on_patched = lambda group, before, after: told.append((group, before, after))
    assert store.reward_recall(["p1", "p3"], T0) == {"p1": 0.05, "p3": 0.05}

    parses: list[str] = []
    original = MemoryStore.read_group
    monkeypatch.setattr(MemoryStore, "read_group", lambda self, g: parses.append(g) or original(self, g))
    again = {m.id: m for m in store.read_group("project")}
    assert parses == []  # current without a re-read
    assert again["p1"] is cached["p1"] and again["p1"].confidence == pytest.approx(0.65)
    assert again["p0"].confidence == 0.6
    fresh = {m.id: m for m in MemoryStore(paths).read_group("project")}
    assert {i: m.to_json() for i, m in again.items()} == {i: m.to_json() for i, m in fresh.items()}
    assert [group for group, _, _ in told] == ["project"]


def test_another_processs_write_in_between_still_forces_a_re_read(paths: DataPaths) -> None:
    store = CachedReadStore(paths)
    store.read_group("project")
    told: list[str] = []
    store.on_patched = lambda group, before, after: told.append(group)
    MemoryStore(paths).reward_recall(["p2"], T0)  # someone else's write the cache never saw
    store.reinforce("p1", T0)  # writes without reading through the cache first
    assert told == []
    confidences = {m.id: m.confidence for m in store.read_group("project")}
    assert confidences["p1"] == pytest.approx(0.7) and confidences["p2"] == pytest.approx(0.65)


def test_a_change_recall_scores_on_is_not_patched(paths: DataPaths) -> None:
    store = CachedReadStore(paths)
    before = {m.id: m for m in store.read_group("project")}
    told: list[str] = []
    store.on_patched = lambda group, b, a: told.append(group)
    store.replace("p4", "项目事实第 4 条：服务 svc-4 的灰度开关改名为 flag_four", T0)
    assert told == []
    after = {m.id: m for m in store.read_group("project")}
    assert after["p4"] is not before["p4"] and "flag_four" in after["p4"].text


def test_the_engine_keeps_its_version_after_its_own_reward(paths: DataPaths) -> None:
    service = RecallService(paths)
    service.memories = {m.id: m for m in service.store.all()}
    service._store_stamps = service._stamps()
    service.store.reward_recall(["p0"], T0)
    assert service._store_stamps == service._stamps()  # the next reload has nothing to re-read
    assert service.memories["p0"].confidence == pytest.approx(0.65)
    MemoryStore(paths).reward_recall(["p1"], T0)
    assert service._store_stamps != service._stamps()  # another process's write: re-read


def test_reward_lookups_follow_each_version_of_the_file(paths: DataPaths) -> None:
    store = CachedReadStore(paths)
    assert store.recall_gains(["p1"], T0) == {"p1": 0.05}
    store.reward_recall(["p1"], T0)
    assert store.recall_gains(["p1", "p0"], T0) == {"p0": 0.05}  # p1 had its reward today
    MemoryStore(paths).delete(["p2"], T0)
    assert store.recall_gains(["p2", "p3"], T0) == {"p3": 0.05}  # the new version: p2 is gone
    MemoryStore(paths).restore("p2", T0)
    assert store.recall_gains(["p2"], T0) == {"p2": 0.05}
