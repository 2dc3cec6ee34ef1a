"""`memself verify` on case sets whose memories and prompts belong to workspaces, with the real
offline model (multilingual-e5-small): leaks across workspaces are counted without scoping and are
none with it, in-workspace hits are compared with everything global, and the format's bad input
gets a clear Chinese error."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memself.errors import InvalidInput
from memself.model.catalog import MODELS, OFFLINE_MODEL
from memself.recall.gate import GateParams, default_floors
from memself.recall.pool import RecallPool
from memself.recall.scoring import load_recaller
from memself.verify.cases import load_cases, parse_cases
from memself.verify.run import render_json, render_text, run_cases
from memself.verify.workspaces import workspace_key

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
EVAL = Path(__file__).resolve().parents[1] / "eval"

# Two repositories with a log platform each (same words, different facts), one rule of each, and
# a global rule; prompts asked from each.
SMALL: dict[str, Any] = {
    "workspaces": {"alpha": "订单服务", "beta": "结算服务"},
    "memories": [
        {
            "key": "g1",
            "workspace": None,
            "group": "rule",
            "text": "写 Dockerfile 用多阶段构建，基础镜像不要用 latest。",
        },
        {
            "key": "a-log",
            "workspace": "alpha",
            "group": "project",
            "text": "alpha 的线上日志在 Kibana 查，地址 kibana.alpha.internal，索引 alpha-*，按 traceId 搜。",
        },
        {
            "key": "b-log",
            "workspace": "beta",
            "group": "project",
            "text": "beta 的线上日志在 Kibana 查，地址 kibana.beta.internal，索引 beta-*，按 traceId 搜。",
        },
        {
            "key": "a-dep",
            "workspace": "alpha",
            "group": "rule",
            "text": "这个仓库装依赖一律用 yarn，不要用 npm，也不要提交 package-lock.json。",
        },
        {
            "key": "b-dep",
            "workspace": "beta",
            "group": "rule",
            "text": "这个仓库装依赖一律用 pnpm，不要用 npm，也不要提交 package-lock.json。",
        },
    ],
    "relevant": [
        {"prompt": "线上日志去哪查，拿到 traceId 了", "workspace": "alpha", "expect": ["a-log"]},
        {"prompt": "线上日志去哪查，拿到 traceId 了", "workspace": "beta", "expect": ["b-log"]},
        {"prompt": "装依赖用 npm 还是别的", "workspace": "alpha", "expect": ["a-dep"]},
        {"prompt": "装依赖用 npm 还是别的", "workspace": "beta", "expect": ["b-dep"]},
        {"prompt": "给这个服务写个 Dockerfile", "workspace": "beta", "expect": ["g1"]},
    ],
    "irrelevant": [
        {"prompt": "冒泡排序的时间复杂度是多少", "workspace": "alpha"},
        {"prompt": "今天中午吃什么好", "workspace": None},
    ],
    "single_memory": [
        {
            "workspace": "alpha",
            "memory": {
                "workspace": "beta",
                "group": "project",
                "text": "beta 的测试环境是 beta-sit.internal，每天早上 6 点用脱敏快照重置数据库。",
            },
            "relevant": ["测试环境地址是多少，数据怎么又没了"],
        },
        {
            "workspace": "beta",
            "memory": {
                "workspace": "beta",
                "group": "project",
                "text": "beta 的测试环境是 beta-sit.internal，每天早上 6 点用脱敏快照重置数据库。",
            },
            "relevant": ["测试环境地址是多少，数据怎么又没了"],
        },
    ],
}


@pytest.fixture(scope="module")
def recaller(e5_encoder, tmp_path_factory):
    return load_recaller(e5_encoder, OFFLINE_MODEL, tmp_path_factory.mktemp("space"))


def e5_params() -> GateParams:
    return GateParams(default_floors(MODELS[OFFLINE_MODEL]), -1.0, 3)


def test_leaks_are_counted_without_scoping_and_none_with_it(recaller) -> None:
    res = run_cases(parse_cases(SMALL, "small"), recaller, e5_params(), NOW, model=OFFLINE_MODEL)
    ws = res.workspaces
    assert ws is not None and ws.names == ("alpha", "beta")
    scoped, unscoped, reference = ws.modes["scoped"], ws.modes["unscoped"], ws.modes["reference"]
    # Every main prompt sees another workspace's memories; of the single-memory prompts only the one
    # asked from alpha about beta's memory does.
    assert scoped.prompts == unscoped.prompts == reference.prompts == 5 + 2 + 1
    # Asked from alpha, the log question also brings beta's log platform (and the other way round).
    assert unscoped.leaks >= 2, unscoped.leaked
    assert {(lk.workspace, lk.memory) for lk in unscoped.leaked} >= {("alpha", "b-log"), ("beta", "a-log")}
    assert all(lk.workspace != lk.memory_workspace for lk in unscoped.leaked)
    assert scoped.leaks == 0 and scoped.leaked == []
    assert unscoped.kind_prompts == {"relevant": 5, "irrelevant": 2, "single": 1}
    assert sum(unscoped.kind_leaks.values()) == unscoped.leaks and unscoped.kind_leaks["single"] == 1
    # The single-memory case asked from alpha about beta's memory is exposed, not an in-workspace case.
    assert any(lk.memory == "single00" for lk in unscoped.leaked)
    assert scoped.single_cases == unscoped.single_cases == 1
    # Everything global recalls exactly what recall without scoping does (the pool's scores do not
    # depend on workspaces), and the verify report's own counts are the unscoped ones.
    assert reference.hits == unscoped.hits and reference.leaks == unscoped.leaks
    for group in ("rule", "project"):
        assert unscoped.hits[group] == res.groups[group].hits
        assert unscoped.cases[group] == res.groups[group].cases
    # Scoping loses no in-workspace hit: with fewer competitors the relative line can only drop.
    assert ws.lost == []
    assert scoped.in_workspace_hits >= reference.in_workspace_hits
    assert scoped.hits["project"] == 2  # each log question finds its own platform
    targets = {t.name: t.met for t in res.targets}
    assert targets["workspace-leaks"] and targets["workspace-hits"]

    text = render_text(res)
    assert "工作区隔离（2 个工作区：alpha、beta）" in text
    assert "分工作区：跨工作区泄漏 0/8（0%）（相关输入 0/5，无关输入 0/2，单条记忆用例 0/1）" in text
    assert "不分工作区时的泄漏：[alpha] 线上日志去哪查" in text
    js = render_json(res)["workspaces"]
    assert js["keys"] == {"alpha": workspace_key("alpha"), "beta": workspace_key("beta")}
    assert js["scoped"]["leaks"] == 0 and js["unscoped"]["leaks"] == unscoped.leaks
    assert js["scoped"]["byKind"]["single"] == {"prompts": 1, "leaks": 0}
    assert js["scoped"]["project"] == {"cases": 2, "hits": 2}
    assert js["lost"] == []


def test_a_scoping_bug_in_the_pool_shows_up_as_leaks(recaller, monkeypatch: pytest.MonkeyPatch) -> None:
    # The figures come from the product's RecallPool.members: broken there, they say so.
    def ignore_workspace(self: RecallPool, group: str | None, workspace: str | None = None) -> Any:
        return original(self, group, None)

    original = RecallPool.members
    monkeypatch.setattr(RecallPool, "members", ignore_workspace)
    res = run_cases(parse_cases(SMALL, "small"), recaller, e5_params(), NOW)
    assert res.workspaces is not None and res.workspaces.modes["scoped"].leaks >= 2
    assert not {t.name: t.met for t in res.targets}["workspace-leaks"]


def test_keys_are_absolute_paths_named_after_the_workspace() -> None:
    from memself.store.workspaces import display_name, workspace_for_key

    key = workspace_key("pay-service")
    assert os.path.isabs(key) and display_name(key) == "pay-service"
    assert workspace_for_key(key) is not None and workspace_key("pay-service") == key


def test_sets_without_workspaces_read_and_report_as_before(recaller) -> None:
    for path in sorted((EVAL / "cases").glob("*.json")):
        cases = load_cases(path)
        assert cases.workspaces == ()
        assert {m.workspace for m in cases.memories} == {""}
    plain = copy.deepcopy(SMALL)
    del plain["workspaces"]
    for entry in (*plain["memories"], *plain["relevant"], *plain["irrelevant"], *plain["single_memory"]):
        entry.pop("workspace", None)
        entry.get("memory", {}).pop("workspace", None)
    res = run_cases(parse_cases(plain, "plain"), recaller, e5_params(), NOW)
    assert res.workspaces is None
    assert "workspaces" not in render_json(res) and "工作区" not in render_text(res)
    assert [t.name for t in res.targets] == [
        "project-hits",
        "project-leaks",
        "rule-hits",
        "rule-leaks",
        "single-hits",
    ]


def test_the_committed_workspace_set_is_scoped_without_loss(recaller) -> None:
    cases = load_cases(EVAL / "workspaces" / "three-repos.json")
    assert cases.workspaces == ("pay-service", "driver-app", "ops-portal")
    assert all(c.workspace for c in (*cases.relevant, *cases.irrelevant))
    res = run_cases(cases, recaller, e5_params(), NOW)
    ws = res.workspaces
    assert ws is not None
    assert ws.modes["scoped"].leaks == 0 and ws.modes["unscoped"].leaks > 0
    assert ws.lost == []


# ---------------------------------------------------------------------------------- bad input


def _with(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(SMALL)
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["relevant"][1].update(workspace="gamma"),
            "relevant[1].workspace 是未知的工作区 gamma（已知的工作区：alpha、beta）",
        ),
        (
            lambda d: d["irrelevant"][0].update(workspace="gamma"),
            "irrelevant[0].workspace 是未知的工作区 gamma",
        ),
        (
            lambda d: d["single_memory"][0].update(workspace="gamma"),
            "single_memory[0].workspace 是未知的工作区 gamma",
        ),
        (lambda d: d["memories"][1].update(workspace="gamma"), "memories[1].workspace 是未知的工作区 gamma"),
        (
            lambda d: d["relevant"][0].update(workspace=3),
            "relevant[0].workspace 应为工作区名（字符串）或 null",
        ),
        (lambda d: d["irrelevant"][1].update(workspace=["alpha"]), "irrelevant[1].workspace 应为工作区名"),
        (lambda d: d["memories"][0].update(workspace=True), "memories[0].workspace 应为工作区名"),
        (lambda d: d.update(workspaces="alpha"), "workspaces 应为 {工作区名: 说明} 对象或工作区名数组"),
        (lambda d: d.update(workspaces=["alpha", "alpha"]), "workspaces 里有重复的工作区名"),
        (lambda d: d.update(workspaces=["alpha", "a/b"]), "工作区名 'a/b' 无效"),
        (
            lambda d: d["relevant"][0].update(expect=["b-log"]),
            "relevant[0] 在工作区 alpha提问，看不到它期望的记忆 b-log（属于工作区 beta）",
        ),
        (
            lambda d: d["relevant"][0].update(workspace=None),
            "relevant[0] 在工作区之外提问，看不到它期望的记忆 a-log",
        ),
    ],
)
def test_bad_workspace_input_gets_a_clear_error(change: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_cases(_with(change), "bad.json")
    assert message in str(caught.value)


def test_without_a_declaration_the_memories_name_the_workspaces() -> None:
    data = _with(lambda d: d.pop("workspaces"))
    assert parse_cases(data, "x").workspaces == ("alpha", "beta")
    data["irrelevant"][0]["workspace"] = "gamma"
    with pytest.raises(InvalidInput, match="未知的工作区 gamma"):
        parse_cases(data, "x")


def test_the_cli_refuses_a_bad_file_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    text = json.dumps(_with(lambda d: d["relevant"][0].update(workspace="gamma")), ensure_ascii=False)
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "memself", "verify", "--cases", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 1
    assert result.stderr.startswith("错误：") and "未知的工作区 gamma" in result.stderr
    assert path.read_text(encoding="utf-8") == text
