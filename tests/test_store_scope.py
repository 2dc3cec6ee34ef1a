"""``MemoryStore.add`` only counts a duplicate the new memory's scope sees."""

from __future__ import annotations

from datetime import timedelta

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import Workspace
from tests.support.judge_helpers import NOW

PAY = Workspace("/srv/repos/pay-service", "pay-service")
SHOP = Workspace("/srv/repos/web-shop", "web-shop")
TEXT = "本地启动前先执行 make deps 安装依赖"
EARLIER = NOW - timedelta(days=3)


def test_another_workspaces_twin_is_a_new_memory_here() -> None:
    store = MemoryStore(DataPaths.default())
    theirs = store.create(TEXT, "project", EARLIER, workspace=SHOP)
    added = store.add(TEXT, "project", NOW, workspace=PAY)
    assert not added.duplicate and added.memory.workspace == PAY.key
    assert {(m.workspace, m.confidence) for m in store.all()} == {(SHOP.key, 0.5), (PAY.key, 0.5)}
    assert store.get(theirs.id).confidence == 0.5


def test_a_global_twin_is_reinforced_by_a_workspace_create() -> None:
    store = MemoryStore(DataPaths.default())
    shared = store.create(TEXT, "project", EARLIER)
    added = store.add(TEXT, "project", NOW, workspace=PAY)
    assert added.duplicate and added.memory.id == shared.id and added.memory.workspace == ""
    assert [m.confidence for m in store.all()] == [0.6]


def test_a_global_create_does_not_fold_into_a_workspaces_twin() -> None:
    store = MemoryStore(DataPaths.default())
    store.create(TEXT, "project", EARLIER, workspace=PAY)
    added = store.add(TEXT, "project", NOW)
    assert not added.duplicate and added.memory.workspace == ""
    assert sorted(m.workspace for m in store.all()) == ["", PAY.key]


def test_the_same_workspaces_twin_is_reinforced() -> None:
    store = MemoryStore(DataPaths.default())
    mine = store.create(TEXT, "project", EARLIER, workspace=PAY)
    added = store.add(TEXT, "project", NOW, workspace=PAY)
    assert added.duplicate and added.memory.id == mine.id and added.memory.confidence == 0.6
    assert len(store.all()) == 1


def test_a_trashed_twin_is_named_only_when_the_scope_sees_it() -> None:
    store = MemoryStore(DataPaths.default())
    theirs = store.create(TEXT, "project", EARLIER, workspace=SHOP)
    store.delete([theirs.id], EARLIER)
    assert store.add(TEXT, "project", NOW, workspace=PAY).trashed_twin is None
    store.delete([m.id for m in store.all()], NOW)
    again = store.add(TEXT, "project", NOW + timedelta(days=1), workspace=PAY)
    assert again.trashed_twin is not None and again.trashed_twin.memory.workspace == PAY.key
