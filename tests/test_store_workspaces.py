"""The store and workspaces: a duplicate counts only where the new memory's scope sees it, and a
move changes a memory's scope and nothing else, through the same locked, checked write."""

from __future__ import annotations

import json

import pytest

from memself.errors import LockLost, NotFound
from memself.store.memory_store import MemoryStore
from memself.store.records import Memory
from memself.store.workspaces import Workspace
from tests.support.helpers import T0, by_id, days, make_store, record, write_records

PAY = Workspace("/srv/pay-service", "pay-service")
SHOP = Workspace("/srv/shop", "shop")


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def test_add_stores_the_workspace(store: MemoryStore) -> None:
    added = store.add("支付服务的灰度开关是 pay_new_flow", "project", T0, workspace=PAY)
    raw = json.loads(store.paths.group_file("project").read_text("utf-8"))
    assert raw["workspace"] == PAY.key and raw["workspaceName"] == "pay-service"
    assert by_id(store, added.memory.id).workspace == PAY.key


def test_a_twin_in_another_workspace_is_not_a_duplicate(store: MemoryStore) -> None:
    first = store.add("构建命令是 make build-all", "project", T0, workspace=PAY)
    second = store.add("构建命令是 make build-all", "project", T0 + days(1), workspace=SHOP)
    assert not second.duplicate and second.memory.id != first.memory.id
    assert {m.workspace for m in store.read_group("project")} == {PAY.key, SHOP.key}
    # The first one was not reinforced by the second add.
    assert by_id(store, first.memory.id).confidence == 0.5


def test_a_global_twin_counts_for_a_workspace(store: MemoryStore) -> None:
    glob = store.add("回答一律使用中文", "rule", T0)
    again = store.add("回答一律使用中文", "rule", T0 + days(1), workspace=PAY)
    assert again.duplicate and again.memory.id == glob.memory.id and again.gain > 0
    assert by_id(store, glob.memory.id).workspace == ""  # reinforced, not narrowed
    assert len(store.read_group("rule")) == 1


def test_a_workspace_twin_does_not_count_for_a_global_add(store: MemoryStore) -> None:
    store.add("回答一律使用中文", "rule", T0, workspace=PAY)
    glob = store.add("回答一律使用中文", "rule", T0 + days(1))
    assert not glob.duplicate and glob.memory.workspace == ""
    assert sorted(m.workspace for m in store.read_group("rule")) == ["", PAY.key]


def test_a_trashed_twin_is_named_only_when_the_scope_sees_it(store: MemoryStore) -> None:
    other = store.add("部署前先跑 make check", "rule", T0, workspace=SHOP)
    store.delete([other.memory.id], T0)
    assert store.add("部署前先跑 make check", "rule", T0, workspace=PAY).trashed_twin is None
    mine = store.add("测试前先启动 redis", "rule", T0, workspace=PAY)
    store.delete([mine.memory.id], T0)
    twin = store.add("测试前先启动 redis", "rule", T0, workspace=PAY).trashed_twin
    assert twin is not None and twin.memory.id == mine.memory.id


def test_move_changes_only_the_scope(store: MemoryStore) -> None:
    original = record("a", "提交前先跑 make lint", 0.7, appliesWhen=["提交代码"], futureField={"x": 1})
    write_records(store, "rule", [original])
    memory, previous = store.move("a", PAY, T0 + days(3))
    assert previous == "" and memory.workspace == PAY.key
    raw = json.loads(store.paths.group_file("rule").read_text("utf-8"))
    assert raw == {**original, "workspace": PAY.key, "workspaceName": "pay-service"}
    _, previous = store.move("a", None, T0 + days(4))
    assert previous == PAY.key
    # Back to global: the record is the one the original plugin wrote, key for key.
    assert json.loads(store.paths.group_file("rule").read_text("utf-8")) == original


def test_move_to_the_same_scope_writes_nothing(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "提交前先跑 make lint", 0.7, workspace=PAY.key)])
    before = store.paths.group_file("rule").read_bytes()
    memory, previous = store.move("a", PAY, T0)
    assert previous == PAY.key == memory.workspace
    assert store.paths.group_file("rule").read_bytes() == before
    assert not store.paths.html.exists()  # no write, so no page either


def test_move_of_an_unknown_id_is_refused(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "提交前先跑 make lint", 0.7)])
    before = store.paths.group_file("rule").read_bytes()
    with pytest.raises(NotFound, match="找不到记忆「nope」"):
        store.move("nope", PAY, T0)
    assert store.paths.group_file("rule").read_bytes() == before


def test_a_move_whose_file_changed_under_it_writes_nothing(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_records(store, "rule", [record("a", "提交前先跑 make lint", 0.7)])
    real = Memory.set_workspace

    def set_and_append(self: Memory, workspace: Workspace | None) -> None:
        real(self, workspace)
        # Another program (the original plugin) appends a memory while the move holds its copy.
        with open(store.paths.group_file("rule"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record("n", "原插件新增的规则", 0.5)) + "\n")

    monkeypatch.setattr(Memory, "set_workspace", set_and_append)
    with pytest.raises(LockLost, match="没有写入任何文件"):
        store.move("a", PAY, T0)
    monkeypatch.undo()
    assert {m.id: m.workspace for m in store.read_group("rule")} == {"a": "", "n": ""}
