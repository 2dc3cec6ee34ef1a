"""``memself stats`` (Chinese and --json) and the page's usage section, from checked turns."""

from __future__ import annotations

import json

from click.testing import CliRunner

from memself.cli import main as cli
from memself.kept import counts, ledger
from memself.page.html import write_snapshot
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, make_store, record, write_records

SHOP = "/home/dev/code/shop"


def seeded() -> MemoryStore:
    store = make_store()
    own = record("p-shop", "商城的缓存 key 统一加前缀 shop:", 0.6, "project")
    own.update(workspace=SHOP, workspaceName="shop")
    write_records(
        store,
        "project",
        [
            record("p-flag", "灰度开关是 pay_new_flow", 0.6, "project"),
            own,
            record("p-none", "从未召回的事实", 0.6, "project"),
        ],
    )
    write_records(
        store, "rule", [record("r-zh", "回答问题时一律使用中文", 0.8), record("r-ok", "不要自动 commit", 0.7)]
    )
    store.add_counts(
        {"p-flag": {counts.SHOWN: 4, counts.USED: 3}, "p-shop": {counts.SHOWN: 6, counts.USED: 0}}, T0
    )
    store.add_counts({"r-zh": {counts.BROKEN: 3}}, T0, stamp_field=counts.BROKEN_AT)
    paths = store.paths
    for _ in range(4):
        ledger.add_turn(paths, "", {"rulesShown": 1, "factsShown": 1, "factsUsed": 1, "rulesBroken": 0})
    for i in range(6):
        ledger.add_turn(
            paths, SHOP, {"rulesShown": 0, "factsShown": 1, "factsUsed": 0, "rulesBroken": int(i < 3)}
        )
    return store


def test_stats_json_per_group_and_workspace() -> None:
    seeded()
    result = CliRunner().invoke(cli, ["stats", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["turns"] == 10
    assert data["groups"]["rule"] == {"shown": 4, "perTurn": 0.4, "broken": 3}
    assert data["groups"]["project"] == {"shown": 10, "used": 3, "perTurn": 1.0, "usedShare": 0.3}
    spaces = {s["workspace"]: s for s in data["workspaces"]}
    assert spaces[None]["turns"] == 4 and spaces[None]["usedShare"] == 1.0
    assert spaces[SHOP]["workspaceName"] == "shop" and spaces[SHOP]["rulesBroken"] == 3
    assert spaces[SHOP]["usedShare"] == 0.0 and spaces[SHOP]["factsPerTurn"] == 1.0
    assert [m["id"] for m in data["shownMost"]] == ["p-shop", "p-flag"]
    assert [m["id"] for m in data["usedLeast"]] == ["p-shop", "p-flag"]  # never-recalled ones are not there
    assert data["brokenMost"][0]["id"] == "r-zh" and data["brokenMost"][0]["advice"].startswith("经常被违反")


def test_stats_in_chinese_and_on_the_page() -> None:
    store = seeded()
    out = CliRunner().invoke(cli, ["stats"]).output
    assert "统计了 10 轮回答。" in out
    assert "project：每轮召回 1 条，注入 10 次，用上 3 次（30%）" in out
    assert f"仅项目 shop（{SHOP}）：6 轮，每轮 rule 0 条、project 1 条，事实用上 0%，违反规则 3 次" in out
    assert "商城的缓存 key 统一加前缀 shop:（注入 6 次，用上 0 次，id p-shop）" in out
    assert "回答问题时一律使用中文（被违反 3 次，经常被违反：换个说法或写得更具体，id r-zh）" in out
    fresh = MemoryStore(store.paths)
    page = write_snapshot(store.paths, {"rule": fresh.active("rule"), "project": fresh.active("project")}, T0)
    html = page.read_text("utf-8")
    assert "使用情况（memself stats）" in html and "<li>统计了 10 轮回答。</li>" in html
    assert "用上 3 次（30%）" in html


def test_no_turns_yet() -> None:
    DataPaths.default().ensure()
    out = CliRunner().invoke(cli, ["stats"]).output
    assert out.startswith("还没有统计")
    data = json.loads(CliRunner().invoke(cli, ["stats", "--json"]).output)
    assert data["turns"] == 0 and data["groups"]["project"]["usedShare"] is None
