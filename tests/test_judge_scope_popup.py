"""The confirm popup shows each proposal's scope and offers both within four options;
memory_resolve writes the chosen scope into the job's sealed workspace, or globally."""

from __future__ import annotations

import pytest

from memself.judge import jobs
from memself.judge.resolve import DECISIONS, MSG_MISMATCH, ResolveRejected, resolve
from memself.mcp_server import TOOLS
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import Workspace
from memself.text.messages import popup_options
from tests.support.judge_helpers import NOW, configure, proposal, ready, stop

PAY = Workspace("/srv/repos/pay-service", "pay-service")
FACT = "支付回调的签名校验在 callback/verify.py 里实现"
RULE = "回答问题时一律使用中文"
SCOPED = ("create_rule_here", "create_rule_all", "create_project_here", "create_project_all")


@pytest.fixture
def env() -> tuple[DataPaths, MemoryStore]:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", True)
    return paths, MemoryStore(paths)


def scoped(prop: dict, scope: str | None) -> dict:
    return prop if scope is None else {**prop, "scope": scope}


def prompted(paths, store, prop, workspace: str = PAY.key, turn: str = "t1") -> tuple[str, str]:
    sid = ready(paths, f"记住：{prop['text']}", prop, turn=turn, workspace=workspace)
    shown = stop(paths, store)
    assert shown is not None
    return sid, shown[1]


# --- the options ------------------------------------------------------------------------------


def test_a_pure_create_in_a_workspace_offers_both_scopes_in_four_options() -> None:
    options = popup_options(scoped(proposal(FACT, category="project"), "workspace"), PAY.name)
    assert options == [
        (f"落成，使用推荐标签 project，范围：仅此项目（pay-service）「{FACT}」", "create_project_here"),
        (f"落成，使用推荐标签 project，范围改为：所有项目「{FACT}」", "create_project_all"),
        (f"落成，把标签改为 rule，范围：仅此项目（pay-service）「{FACT}」", "create_rule_here"),
        ("不落成", "discard"),
    ]
    global_rule = popup_options(scoped(proposal(RULE), "global"), PAY.name)
    assert [d for _, d in global_rule] == [
        "create_rule_all",
        "create_rule_here",
        "create_project_all",
        "discard",
    ]
    assert global_rule[1][0] == f"落成，使用推荐标签 rule，范围改为：仅此项目（pay-service）「{RULE}」"


def test_a_target_offer_keeps_four_options_with_both_scopes() -> None:
    store = MemoryStore(DataPaths.default())
    target = store.create("支付回调签名校验的代码位置是 callback/verify.py", "project", NOW)
    for action, merged in (
        ("reinforce", ""),
        ("merge", "合并后的正文写在这里"),
        ("replace", ""),
        ("unsure", ""),
    ):
        prop = scoped(proposal(FACT, action, "project", target, merged), "workspace")
        options = popup_options(prop, PAY.name)
        assert len(options) == 4
        assert [d for _, d in options][1:] == ["create_project_here", "create_project_all", "discard"]
        assert options[1][0].startswith("仍新建，使用推荐标签 project，范围：仅此项目（pay-service）")


def test_without_a_workspace_the_options_are_the_originals() -> None:
    prop = proposal(FACT, category="project")
    assert (
        popup_options(scoped(prop, "workspace"))
        == popup_options(prop)
        == [
            (f"落成，使用推荐标签 project「{FACT}」", "create_project"),
            (f"落成，把标签改为 rule「{FACT}」", "create_rule"),
            ("不落成", "discard"),
        ]
    )


def test_a_workspace_name_is_quoted_inertly() -> None:
    options = popup_options(scoped(proposal(FACT, category="project"), "workspace"), "<b>MEMORY_CONFIRM_V1")
    assert all("<b>" not in label and "MEMORY_CONFIRM_V1" not in label for label, _ in options)


# --- the popup as Stop renders it --------------------------------------------------------------


def test_stop_shows_the_scope_and_the_scoped_decisions(env) -> None:
    paths, store = env
    sid = ready(
        paths, f"记住：{FACT}", scoped(proposal(FACT, category="project"), "workspace"), workspace=PAY.key
    )
    visible, model = stop(paths, store)
    assert "   范围：仅此项目（pay-service）（推荐）" in visible.split("\n")
    assert f"sessionID：{sid}" in model and "推荐范围：仅此项目（pay-service）" in model
    assert f"所有项目「{FACT}」 → create_project_all" in model
    assert "create_project_here、create_project_all" in model


def test_stop_without_a_workspace_shows_no_scope(env) -> None:
    paths, store = env
    ready(paths, f"记住：{FACT}", proposal(FACT, category="project"))
    visible, model = stop(paths, store)
    assert "范围" not in visible and "范围" not in model and "_here" not in model


# --- memory_resolve ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recommended", "decision", "group", "landed"),
    [
        ("workspace", "create_project", "project", PAY.key),
        ("global", "create_project", "project", ""),
        (None, "create_project", "project", PAY.key),
        ("workspace", "create_project_all", "project", ""),
        ("global", "create_project_here", "project", PAY.key),
        ("workspace", "create_rule", "rule", PAY.key),
        ("workspace", "create_rule_all", "rule", ""),
        ("global", "create_rule_here", "rule", PAY.key),
    ],
)
def test_resolve_writes_the_chosen_scope(env, recommended, decision, group, landed) -> None:
    paths, store = env
    sid, _ = prompted(paths, store, scoped(proposal(FACT, category="project"), recommended))
    notice = resolve(paths, store, "claude", sid, decision, NOW)
    [memory] = store.all()
    assert (memory.category, memory.workspace) == (group, landed)
    where = "仅此项目（pay-service）" if landed else "所有项目"
    assert notice.endswith(f"，范围：{where}") and notice.startswith(f"生成了一条记忆：{FACT}。归类：{group}")
    job = jobs.load_job(paths, sid)
    assert job["applied"] and job["reason"] == decision


def test_a_scoped_decision_needs_a_turn_with_a_workspace(env) -> None:
    paths, store = env
    sid, _ = prompted(paths, store, scoped(proposal(FACT, category="project"), "workspace"), workspace="")
    for decision in SCOPED:
        with pytest.raises(ResolveRejected) as info:
            resolve(paths, store, "claude", sid, decision, NOW)
        assert str(info.value) == MSG_MISMATCH
    assert store.all() == []
    notice = resolve(paths, store, "claude", sid, "create_project", NOW)
    [memory] = store.all()
    assert memory.workspace == "" and "范围" not in notice


def test_reinforce_merge_replace_keep_the_targets_scope(env) -> None:
    paths, store = env
    shared = store.create("支付回调签名校验的代码位置是 callback/verify.py", "project", NOW)
    mine = store.create("支付服务本地调试端口是 8081，回调地址也走这个端口", "project", NOW, workspace=PAY)
    cases = [
        (shared, "reinforce", "", "所有项目"),
        (mine, "replace", "", "仅此项目（pay-service）"),
        (shared, "merge", "支付回调的签名校验在 callback/verify.py，文件里还有重放检查", "所有项目"),
    ]
    for n, (target, action, merged, where) in enumerate(cases):
        prop = scoped(proposal(FACT, action, "project", target, merged), "workspace")
        sid, _ = prompted(paths, store, prop, turn=f"t{n}")
        notice = resolve(paths, store, "claude", sid, action, NOW)
        assert notice.endswith(f"范围：{where}")
        assert store.get(target.id).workspace == target.workspace
    assert len(store.all()) == 2


def test_the_mcp_schema_offers_every_decision() -> None:
    [tool] = [t for t in TOOLS if t["name"] == "memory_resolve"]
    enum = tool["inputSchema"]["properties"]["decision"]["enum"]
    assert enum == list(DECISIONS)
    assert set(SCOPED) <= set(enum)
    assert {"create_rule", "create_project", "reinforce", "merge", "replace", "discard"} <= set(enum)
