"""Workspaces in the MCP tools: memory_list and memory_read show each memory's scope (reading
only what the current project sees unless asked for all), memory_update's move changes it.
The current project is the workspace of the server's working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.errors import MemselfError
from memself.mcp_server import TOOLS, MemoryTools
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import Workspace, workspace_of
from tests.support.judge_helpers import NOW, configure
from tests.support.mcp_client import run, text_of


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Workspace]:
    out: dict[str, Workspace] = {}
    for name in ("pay-service", "shop"):
        root = tmp_path.resolve() / name
        (root / ".git").mkdir(parents=True)
        (root / "src").mkdir()
        found = workspace_of(str(root))
        assert found is not None
        out[name] = found
    return out


def tools_in(workspace: Workspace | None) -> MemoryTools:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1")
    return MemoryTools(paths, "claude", now_fn=lambda: NOW, opener=lambda _: None, workspace=workspace)


def fails(tools: MemoryTools, args: dict) -> str:
    with pytest.raises(MemselfError) as info:
        tools.call("memory_update", args)
    return str(info.value)


def test_schema_offers_move_with_a_scope() -> None:
    update = next(t for t in TOOLS if t["name"] == "memory_update")
    props = update["inputSchema"]["properties"]
    assert props["action"]["enum"] == ["delete", "merge", "replace", "move"]
    assert props["scope"]["enum"] == ["global", "workspace"] and props["workspace"]["type"] == "string"
    assert "move：" in update["description"] and "当前项目" in update["description"]
    read = next(t for t in TOOLS if t["name"] == "memory_read")
    assert read["inputSchema"]["properties"]["all_workspaces"]["type"] == "boolean"


def test_list_counts_per_scope_and_marks_the_current_project(repos: dict[str, Workspace]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    tools = tools_in(pay)
    store = MemoryStore(tools.paths)
    store.create("回答问题时使用中文", "rule", NOW)
    store.create("支付页灰度开关是 pay_new_flow", "project", NOW, workspace=pay)
    store.create("商城图片放在 shop-img 桶", "project", NOW, workspace=shop)
    lines = tools.call("memory_list", {}).split("\n")
    assert lines[0].startswith("rule    1 条")
    assert lines[1].startswith("project 2 条")
    assert lines[2:] == [
        "按范围：",
        "- 所有项目：rule 1 条，project 0 条",
        f"- 仅项目 pay-service（{pay.key}）（当前项目）：rule 0 条，project 1 条",
        f"- 仅项目 shop（{shop.key}）：rule 0 条，project 1 条",
        f"当前项目：pay-service（{pay.key}）；其他项目的记忆不会在这里注入或召回。",
    ]


def test_read_shows_the_current_projects_view_unless_asked_for_all(repos: dict[str, Workspace]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    tools = tools_in(shop)
    store = MemoryStore(tools.paths)
    glob = store.create("所有服务的日志都进 Loki", "project", NOW)
    mine = store.create("商城图片放在 shop-img 桶", "project", NOW, workspace=shop)
    other = store.create("支付页灰度开关是 pay_new_flow", "project", NOW, workspace=pay)
    text = tools.call("memory_read", {"group": "project"})
    assert text.startswith("project（所有项目的和当前项目的，共 2 条）")
    assert f"id {glob.id}，范围：所有项目，来源：本机）" in text
    assert f"id {mine.id}，范围：仅项目 shop（{shop.key}），来源：本机）" in text
    assert other.id not in text and "pay_new_flow" not in text
    everything = tools.call("memory_read", {"group": "project", "all_workspaces": True})
    assert (
        everything.startswith("project（共 3 条）")
        and f"id {other.id}，范围：仅项目 pay-service" in everything
    )
    # No project (the server was started outside one): every memory is listed.
    assert tools_in(None).call("memory_read", {"group": "project"}).startswith("project（共 3 条）")
    assert tools_in(pay).call("memory_read", {"group": "rule"}) == "「rule」下没有所有项目的和当前项目的记忆"


def test_move_to_the_current_project_another_and_back(repos: dict[str, Workspace]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    tools = tools_in(pay)
    store = MemoryStore(tools.paths)
    memory = store.create("提交前先跑 make lint", "rule", NOW)
    before = store.paths.group_file("rule").read_text("utf-8")
    text = tools.call("memory_update", {"action": "move", "id": memory.id, "scope": "workspace"})
    assert text == (
        f"已把 {memory.id} 的范围从「所有项目」改为「仅项目 pay-service（{pay.key}）」，"
        "正文和置信度不变：「提交前先跑 make lint」"
    )
    assert store.get(memory.id).workspace == pay.key
    again = tools.call("memory_update", {"action": "move", "id": memory.id, "scope": "workspace"})
    assert again.startswith(f"{memory.id} 的范围本来就是「仅项目 pay-service")
    named = {"action": "move", "id": memory.id, "scope": "workspace", "workspace": shop.key + "/src"}
    assert "改为「仅项目 shop" in tools.call("memory_update", named)
    assert store.get(memory.id).workspace == shop.key
    tools.call("memory_update", {"action": "move", "id": memory.id, "scope": "global"})
    assert store.paths.group_file("rule").read_text("utf-8") == before


def test_bad_moves_are_refused_and_change_nothing(repos: dict[str, Workspace]) -> None:
    tools = tools_in(None)
    store = MemoryStore(tools.paths)
    memory = store.create("提交前先跑 make lint", "rule", NOW)
    before = store.paths.group_file("rule").read_bytes()
    base = {"action": "move", "id": memory.id}
    assert fails(tools, {"action": "move", "id": memory.id}) == "move 需要 id 和 scope（global 或 workspace）"
    assert fails(tools, {**base, "scope": "team"}) == "move 需要 id 和 scope（global 或 workspace）"
    assert "当前不在任何项目里" in fails(tools, {**base, "scope": "workspace"})
    assert (
        fails(tools, {**base, "scope": "workspace", "workspace": "src"}) == "workspace 需要项目目录的绝对路径"
    )
    assert "目录不存在" in fails(tools, {**base, "scope": "workspace", "workspace": "/no/such/dir"})
    pay = repos["pay-service"].key
    assert "不能给出 workspace" in fails(tools, {**base, "scope": "global", "workspace": pay})
    assert "找不到记忆「mem-x」" in fails(tools, {"action": "move", "id": "mem-x", "scope": "global"})
    assert store.paths.group_file("rule").read_bytes() == before


def test_merge_across_scopes_says_which_scope_the_result_has(repos: dict[str, Workspace]) -> None:
    pay = repos["pay-service"]
    tools = tools_in(pay)
    store = MemoryStore(tools.paths)
    keep = store.create("回答问题时使用中文", "rule", NOW)
    drop = store.create("回答时使用简体中文", "rule", NOW, workspace=pay)
    text = tools.call(
        "memory_update",
        {"action": "merge", "id": keep.id, "id2": drop.id, "text": "回答问题时一律使用简体中文"},
    )
    assert f"注意：{drop.id} 的范围是「仅项目 pay-service（{pay.key}）」" in text
    assert f"合并后的记忆沿用 {keep.id} 的范围「所有项目」" in text
    assert store.get(keep.id).workspace == ""


def test_the_server_started_in_a_project_knows_it(repos: dict[str, Workspace]) -> None:
    """A real stdio server, started in a subdirectory of the repository as a host starts it."""
    pay = repos["pay-service"]
    store = MemoryStore(DataPaths.default())
    memory = store.create("提交前先跑 make lint", "rule", NOW)
    _, _, results = run(
        "claude",
        [
            ("memory_update", {"action": "move", "id": memory.id, "scope": "workspace"}),
            ("memory_list", {}),
        ],
        cwd=pay.key + "/src",
    )
    moved, listed = (text_of(r) for r in results)
    assert f"改为「仅项目 pay-service（{pay.key}）」" in moved
    assert f"当前项目：pay-service（{pay.key}）" in listed
    on_disk = json.loads(store.paths.group_file("rule").read_text("utf-8"))
    assert on_disk["workspace"] == pay.key and on_disk["workspaceName"] == "pay-service"
