"""`memself verify` with the real offline model (multilingual-e5-small): small case files of both
formats, the renderings, several sets with leave-one-set-out, and (slow) the four in-repo sets
reproducing the shipped calibration."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.errors import InvalidInput
from memself.model.catalog import MODELS, OFFLINE_MODEL
from memself.recall.gate import GateParams, default_floors
from memself.recall.memory_side import encode_memories
from memself.recall.scoring import load_recaller
from memself.store.records import Memory
from memself.verify.cases import load_applies_when, load_cases, parse_cases, with_applies_when
from memself.verify.run import render_json, render_text, run_cases

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
EVAL_CASES = Path(__file__).resolve().parents[1] / "eval" / "cases"
APPLIES_WHEN = Path(__file__).resolve().parents[1] / "eval" / "applies-when"

SMALL = {
    "memories": [
        {"key": "r1", "group": "rule", "text": "写 Dockerfile 用多阶段构建，基础镜像不要用 latest 标签。"},
        {"key": "r2", "group": "rule", "text": "回答和代码注释里都不要用 emoji。"},
        {
            "key": "p1",
            "group": "project",
            "text": "订单服务的日志统一在 Kibana 查：kibana.example-corp.com，索引按服务名拆分。",
        },
        {
            "key": "p2",
            "group": "project",
            "text": "测试环境的管理员账号是 admin_test，密码在 1Password 的 QA 保险库里。",
        },
    ],
    "relevant": [
        {"prompt": "帮我给订单服务写个 Dockerfile", "expect": ["r1"]},
        {"prompt": "想查下昨天订单服务的报错日志，去哪看", "expect": ["p1"]},
        {"prompt": "测试环境的管理员账号是哪个", "expect": ["p2"]},
    ],
    "irrelevant": [
        {"prompt": "冒泡排序的时间复杂度是多少"},
        {"prompt": "给我讲个笑话吧"},
        {"prompt": "Kibana 的 KQL 语法怎么写", "near": ["p1"]},
    ],
    "single_memory": [
        {
            "memory": {
                "group": "project",
                "text": "订单服务的日志统一在 Kibana 查：kibana.example-corp.com。",
            },
            "relevant": ["订单服务的日志在哪里查"],
            "irrelevant": ["周末去哪里爬山比较好"],
        },
    ],
}


@pytest.fixture(scope="module")
def recaller(e5_encoder, tmp_path_factory):
    return load_recaller(e5_encoder, OFFLINE_MODEL, tmp_path_factory.mktemp("space"))


def e5_params() -> GateParams:
    return GateParams(default_floors(MODELS[OFFLINE_MODEL]), -1.0, 3)


def test_small_dev_file_counts_and_sweep(recaller, tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(SMALL, ensure_ascii=False), encoding="utf-8")
    res = run_cases(load_cases(path), recaller, e5_params(), NOW, model=OFFLINE_MODEL)
    rule, project = res.groups["rule"], res.groups["project"]
    assert (rule.cases, project.cases) == (1, 2)
    assert rule.irrelevant == project.irrelevant == 3
    # These are easy for the real model at the calibrated floors.
    assert rule.hits == 1 and project.hits == 2, (rule.misses, project.misses)
    assert rule.leaks == 0 and project.leaks == 0, (rule.leaked, project.leaked)
    assert res.single_cases == 1 and res.single_hits == 1
    # The sweep: at a floor above every score nothing is hit or leaked; the best line is feasible.
    top = res.sweep["project"][-1]
    assert top.hits == 0 and top.leaks == 0
    best = res.best["project"]
    assert best is not None and best.hits == 2 and best.leaks == 0
    # Lowering the floor to "off" must let the irrelevant prompts leak (plain relative line).
    lowest = res.sweep["project"][0]
    assert lowest.leaks >= 1
    names = {t.name: t.met for t in res.targets}
    assert names == {
        "project-hits": True,
        "project-leaks": True,
        "rule-hits": True,
        "rule-leaks": True,
        "single-hits": True,
    }
    assert res.passed
    text = render_text(res)
    assert "项目事实" in text and "规则" in text and "结论：通过" in text
    js = render_json(res)
    assert js["passed"] is True and js["project"]["hits"] == 2 and js["rule"]["leaks"] == 0
    json.dumps(js, ensure_ascii=False)  # serialisable


def test_failing_floor_reports_misses_and_fails(recaller) -> None:
    cases = parse_cases(SMALL, "inline")
    res = run_cases(cases, recaller, GateParams({"rule": 0.99, "project": 0.99}, -1.0, 3), NOW)
    assert res.groups["project"].hits == 0 and len(res.groups["project"].misses) == 2
    miss = res.groups["project"].misses[0]
    assert miss.got == () and miss.best_expected < 0.99
    assert not res.passed
    assert "结论：未通过" in render_text(res)


def test_original_format_against_own_pool(recaller, tmp_path: Path) -> None:
    pool = [Memory.create(m["text"], m["group"], NOW) for m in SMALL["memories"]]
    deprecated = Memory.create("测试环境数据库只读账号是 reader，已废弃的旧记忆。", "project", NOW)
    deprecated.deprecated = True
    path = tmp_path / "verify-cases.json"
    path.write_text(
        json.dumps(
            {
                "relevant": [
                    ["帮我给订单服务写个 Dockerfile", "多阶段构建"],
                    ["测试环境的管理员账号是哪个", "admin_test"],
                    ["随便问一句", "根本不存在的片段"],
                ],
                "minHit": 2,
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    # The original's pass rule is under test here, not the calibration: fixed floors, above the
    # built-in "帮我跑一下测试" against the test environment's admin account (0.30 to 0.33).
    params = GateParams({"rule": 0.35, "project": 0.35}, -1.0, 3)
    res = run_cases(load_cases(path), recaller, params, NOW, pool=[*pool, deprecated])
    assert res.fmt == "original" and res.relevant_total == 3
    assert res.relevant_hits == 2
    assert res.unmatched == ["根本不存在的片段"]
    assert res.groups["project"].irrelevant == 11  # the built-in unrelated inputs
    assert res.harmful == 0
    assert res.passed  # minHit 2 reached, nothing harmful
    js = render_json(res)
    assert js["original"]["hits"] == 2 and js["original"]["minHit"] == 2


def test_bad_case_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput, match="不是有效的 JSON"):
        load_cases(bad)
    with pytest.raises(InvalidInput, match="无法识别"):
        parse_cases({"foo": 1})
    with pytest.raises(InvalidInput, match="不存在的记忆"):
        parse_cases(
            {
                "memories": [{"key": "a", "group": "rule", "text": "xxxxxxxx"}],
                "relevant": [{"prompt": "p", "expect": ["zz"]}],
            }
        )
    with pytest.raises(InvalidInput, match="relevant\\[0\\]"):
        parse_cases({"relevant": [["only one"]]})
    with pytest.raises(InvalidInput, match="找不到"):
        load_cases(tmp_path / "missing.json")


def test_memory_vectors_use_the_calibrated_side(e5_encoder) -> None:
    # e5 is calibrated symmetric: memories are encoded like prompts ("query: ").
    text = "回答和代码注释里都不要用 emoji。"
    mem = encode_memories(e5_encoder, [text])[0]
    assert float(mem @ e5_encoder.encode_queries([text])[0]) > 0.9999
    assert float(mem @ e5_encoder.encode_passages([text])[0]) < 0.999


def test_single_file_json_keeps_its_keys(recaller, tmp_path: Path) -> None:
    # What scripts read from `memself verify --cases FILE --json`: these keys, these meanings.
    js = render_json(run_cases(parse_cases(SMALL, "inline"), recaller, e5_params(), NOW))
    for group, cases in (("rule", 1), ("project", 2)):
        assert {"hits", "cases", "leaks", "irrelevant", "floor"} <= set(js[group])
        assert js[group]["cases"] == cases and js[group]["irrelevant"] == 3
        assert js[group]["floor"] == pytest.approx(e5_params().floors[group])
    assert js["single"]["cases"] == 1 and js["single"]["hits"] in (0, 1)
    # Per shape of prompt, through the same gate: every relevant and unrelated prompt under "all".
    shapes = js["shapes"]
    assert next(iter(shapes)) == "all"
    assert shapes["all"]["cases"] == 3 and shapes["all"]["irrelevant"] == 3
    assert set(shapes["all"]["leaks"]) == {"rule", "project"}
    assert shapes["all"]["leaks"]["rule"] == js["rule"]["leaks"]
    assert shapes["all"]["leaks"]["project"] == js["project"]["leaks"]


def test_prompts_are_counted_per_shape(recaller) -> None:
    # A short English prompt, a tagged shorthand one, a long Chinese one; short and unrelated.
    cases = json.loads(json.dumps(SMALL))
    cases["relevant"] += [
        {"prompt": "kibana?", "expect": ["p1"], "tags": ["shorthand"]},
        {"prompt": "where are the order service logs", "expect": ["p1"]},
    ]
    cases["irrelevant"].append({"prompt": "ok"})
    res = run_cases(parse_cases(cases, "inline"), recaller, e5_params(), NOW)
    shapes = render_json(res)["shapes"]
    assert shapes["all"]["cases"] == 5 and shapes["all"]["irrelevant"] == 4
    # Short: "kibana?" (1 word); "ok" and "给我讲个笑话吧" (seven characters: 4 words). English: the
    # two English prompts and "ok". Shorthand: the tagged one.
    assert (shapes["short"]["cases"], shapes["short"]["irrelevant"]) == (1, 2)
    assert (shapes["english"]["cases"], shapes["english"]["irrelevant"]) == (2, 1)
    assert (shapes["shorthand"]["cases"], shapes["shorthand"]["irrelevant"]) == (1, 0)
    # Each relevant prompt here expects memories of one group: its hit is that group's.
    js = render_json(res)
    assert shapes["all"]["hits"] == js["rule"]["hits"] + js["project"]["hits"]
    assert "短问（不超过 4 个词）" in render_text(res) and "缩写和简称" in render_text(res)
    with pytest.raises(InvalidInput):
        bad = json.loads(json.dumps(SMALL))
        bad["relevant"][0]["tags"] = "shorthand"
        parse_cases(bad, "bad")


def test_applies_when_lines_attach_to_memories_and_single_cases(tmp_path: Path) -> None:
    lines = {"r1": ["帮我写个 Dockerfile"], "single00": ["日志去哪查", "x" * 81, "日志去哪查"]}
    path = tmp_path / "aw.json"
    path.write_text(json.dumps(lines, ensure_ascii=False), encoding="utf-8")
    cases = with_applies_when(parse_cases(SMALL, "inline"), load_applies_when(path))
    assert cases.memories[0].applies_when == ("帮我写个 Dockerfile",)
    assert cases.memories[1].applies_when == ()
    # Cleaned as a write would: too long dropped, duplicates dropped.
    assert cases.single[0].memory.key == "single00" and cases.single[0].memory.applies_when == ("日志去哪查",)
    inline = json.loads(json.dumps(SMALL))
    inline["memories"][2]["appliesWhen"] = ["订单服务报错日志在哪看"]
    assert parse_cases(inline, "x").memories[2].applies_when == ("订单服务报错日志在哪看",)
    with pytest.raises(InvalidInput):
        path.write_text('{"r1": "not a list"}', encoding="utf-8")
        load_applies_when(path)


def test_a_set_with_views_scores_them_and_says_so(recaller) -> None:
    with_views = json.loads(json.dumps(SMALL))
    with_views["memories"][2]["appliesWhen"] = ["线上订单报错了去哪看"]
    plain = render_json(run_cases(parse_cases(SMALL, "a"), recaller, e5_params(), NOW))
    res = run_cases(parse_cases(with_views, "b"), recaller, e5_params(), NOW)
    js = render_json(res)
    assert plain["viewOffset"] is None and js["viewOffset"] == recaller.scoring.view_offset
    assert "带适用场景的记忆另加" in render_text(res)
    assert res.scores is not None and res.scores.has_views.tolist() == [False, False, True, False]
    # The other memories score exactly as without views: the sweep of the rule group is unchanged.
    assert js["rule"]["sweep"] == plain["rule"]["sweep"]


def _small_set(name: str, topic: str) -> dict:
    """A tiny case set about ``topic`` (enough for the procedure to run end to end)."""
    return {
        "name": name,
        "memories": [
            {"key": "r1", "group": "rule", "text": f"{topic}相关的代码改完先跑单测再提交。"},
            {"key": "p1", "group": "project", "text": f"{topic}服务的测试环境在 test-{name}.internal。"},
        ],
        "relevant": [
            {"prompt": f"{topic}的这个函数改好了，帮我提交下", "expect": ["r1"]},
            {"prompt": f"{topic}测试环境地址是多少", "expect": ["p1"]},
        ],
        "irrelevant": [{"prompt": "冒泡排序的时间复杂度是多少"}, {"prompt": "给我讲个笑话吧"}],
        "single_memory": [
            {
                "memory": {"group": "project", "text": f"{topic}的告警都发到飞书群「{topic}值班」。"},
                "relevant": [f"{topic}告警发到哪"],
                "irrelevant": ["周末去哪里爬山比较好"],
            }
        ],
    }


def test_several_sets_report_leave_one_set_out(recaller, tmp_path: Path) -> None:
    from memself.verify.sets import render_sets_json, render_sets_text, run_sets

    sets = []
    for name, topic in (("pay", "支付"), ("map", "地图"), ("push", "推送")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_small_set(name, topic), ensure_ascii=False), encoding="utf-8")
        sets.append(load_cases(path))
    res = run_sets(sets, recaller, e5_params(), NOW, OFFLINE_MODEL)
    js = render_sets_json(res)
    assert [s["name"] for s in js["sets"]] == ["pay", "map", "push"]
    assert js["sets"][0]["rule"]["cases"] == 1 and js["sets"][0]["single"]["cases"] == 1
    folds = js["loso"]["folds"]
    assert [f["held"] for f in folds] == ["pay", "map", "push"]
    for fold in folds:
        assert fold["held"] not in fold["calibration"]["sets"] and len(fold["calibration"]["sets"]) == 2
        assert fold["plain"]["project"]["cases"] == 1 and fold["plain"]["single"]["cases"] == 1
        assert fold["views"] is None  # no appliesWhen in these sets
    assert set(js["loso"]["mean"]["plain"]) == {"ruleHit", "ruleLeak", "projectHit", "projectLeak", "single"}
    assert js["calibration"]["sets"] == ["pay", "map", "push"]
    text = render_sets_text(res)
    assert "留一组校准" in text and "留出 map" in text and "留一组平均（不带适用场景）" in text
    # Per shape, held out: each fold's counts summed; every relevant and unrelated prompt once.
    shapes = js["loso"]["shapes"]
    assert shapes["views"] is None
    assert shapes["plain"]["all"]["cases"] == 6 and shapes["plain"]["all"]["irrelevant"] == 6
    assert "按提问形态，留一组" in text


@pytest.mark.full
def test_in_repo_sets_reproduce_the_shipped_calibration(recaller) -> None:
    """The in-repo sets with their hand-written appliesWhen lines: the calibration on all of them
    is the shipped file's, and the held-out figures are the ones docs/recall.md reports."""
    from memself.recall.calibration import load_calibration
    from memself.verify.sets import held_out_shapes, means, run_sets

    sets = [
        with_applies_when(load_cases(p), load_applies_when(APPLIES_WHEN / p.name))
        for p in sorted(EVAL_CASES.glob("*.json"))
    ]
    res = run_sets(sets, recaller, e5_params(), NOW, OFFLINE_MODEL)
    shipped = load_calibration(OFFLINE_MODEL)
    assert shipped is not None and shipped.general is not None
    for g in ("rule", "project"):
        assert res.calibration.floors[g] == pytest.approx(shipped.floors[g], abs=1e-4)
        assert res.calibration.view_offset[g] == pytest.approx(shipped.view_offset[g], abs=1e-4)
        assert res.calibration.penalty[g] == shipped.general.penalty[g]
    m = means(res)
    plain, views = m["plain"], m["views"]
    assert plain is not None and views is not None
    # Held out: well above the plain cosine's 43% / 48% / 39% (rule / project / single hits).
    assert plain["ruleHit"] > 0.55 and plain["projectHit"] > 0.6 and plain["single"] > 0.55
    assert views["ruleHit"] > 0.75 and views["projectHit"] > 0.78 and views["single"] > 0.8
    assert plain["ruleLeak"] < 0.22 and plain["projectLeak"] < 0.07
    # Memories with requests are fitted at their own, stricter leak limits (15% / 3%).
    assert views["ruleLeak"] < 0.16 and views["projectLeak"] < 0.04
    # What `views status` and `doctor` quote is what this run measures.
    for condition, rates in (("without", plain), ("with", views)):
        assert shipped.held_out[condition] == pytest.approx(rates, abs=1e-4)
    # Prompts of at most four words that need a memory, held out: the detector reads their length,
    # and the words of every prompt, from the vocabulary the same run chose.
    assert res.calibration.classifier is not None and shipped.general.words
    assert res.calibration.classifier.words == shipped.general.words
    assert len(shipped.general.weights) == recaller.encoder.dim + 2 + len(shipped.general.words)
    shapes = held_out_shapes(res)
    short_plain, short_views = shapes["plain"]["short"], shapes["views"]["short"]
    # A short lookup naming a memory's identifier is spared part of the penalty (entities.py).
    assert 0.0 < shipped.scoring.get("entity_relief", 0.0) < 1.0
    assert short_plain.hits / short_plain.cases > 0.8 and short_views.hits / short_views.cases > 0.88
    for group, limit in (("rule", 0.15), ("project", 0.05)):
        assert short_views.leaks[group] <= limit * short_views.irrelevant
    # Without requests the relief lets a few short how-to questions about a named tool through.
    assert short_plain.leaks["rule"] <= 0.2 * short_plain.irrelevant
    assert short_plain.leaks["project"] <= 0.07 * short_plain.irrelevant


def _result_with_sweep(
    rule: list[tuple[float, int, int, int]],
    project: list[tuple[float, int, int, int]],
    single_cases: int,
    single_hits: int,
):
    from memself.verify.run import GroupReport, SweepPoint, VerifyResult

    groups = {g: GroupReport(g, 0.4, cases=10, irrelevant=20) for g in ("rule", "project")}
    sweep = {"rule": [SweepPoint(*p) for p in rule], "project": [SweepPoint(*p) for p in project]}
    result = VerifyResult(
        "dev", "cases.json", OFFLINE_MODEL, e5_params(), groups, sweep, {"rule": None, "project": None}, []
    )
    result.single_cases, result.single_hits = single_cases, single_hits
    return result


def test_single_goal_lines_pick_the_least_leaking_pair() -> None:
    from memself.verify.run import single_goal_lines

    # 10 single cases: 9 needed. (floor, hits, leaks, single hits)
    rule = [(0.1, 9, 20, 5), (0.3, 8, 3, 4), (0.5, 6, 1, 3)]
    project = [(0.1, 9, 12, 5), (0.2, 8, 2, 5), (0.3, 7, 1, 4)]
    result = _result_with_sweep(rule, project, 10, 7)
    lines = single_goal_lines(result)
    assert lines is not None
    # rule 0.3 (4) + project 0.2 (5) = 9: leaks 3/4 and 2/1 of their limits (4 and 1 of 20);
    # rule 0.1 + anything leaks 20/4 = 5x its limit.
    assert (lines[0].floor, lines[1].floor) == (0.3, 0.2)
    text = render_text(result)
    assert "要让单条记忆达到 90%，泄漏最少的组合是规则线 0.300（无关输入泄漏 3/20（15%））" in text
    assert render_json(result)["single"]["goalLines"]["project"]["floor"] == 0.2
    # Out of reach: no pair gives 9.
    far = _result_with_sweep([(0.3, 8, 3, 2)], [(0.2, 8, 2, 3)], 10, 5)
    assert single_goal_lines(far) is None
    assert "任何阈值都无法让单条记忆召回达到 90%" in render_text(far)
