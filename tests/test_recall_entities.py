"""A short lookup that names what a memory names is spared part of the general-question penalty
(``memself.recall.entities``); a general question about the same tool, or a longer prompt, is not."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memself.model.catalog import OFFLINE_MODEL
from memself.store.records import Memory

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_identifiers_fold_everyday_shorthand_on_both_sides() -> None:
    from memself.recall.entities import identifiers

    assert identifiers("k8s ns?") == {"kubernetes", "namespace"}
    assert {"kubernetes", "namespace"} <= identifiers("线上跑在 Kubernetes，namespace 是 billing-prod")
    assert "postgresql" in identifiers("pg?") and "postgresql" in identifiers("主库是 Postgres 15")
    assert "github-actions" in identifiers("GHA secrets") & identifiers("CI 用 GitHub Actions")
    assert "mongodb" in identifiers("mongod 几个节点") & identifiers("MongoDB 三节点副本集")
    assert "secret" in identifiers("CI secrets config") & identifiers("the deploy secret lives in Vault")
    assert {"irq_lock", "irq", "lock"} <= identifiers("用 irq_lock 包一下")
    assert identifiers("what is it for here") == set()  # function words name nothing
    assert "redis" in identifiers("redis?")  # a name ending in "is" is not a plural


@pytest.mark.parametrize(
    ("prompt", "names"),
    [
        ("mongo 连接串", {"mongodb"}),
        ("what's redis for here", {"redis"}),
        ("CI secrets config", {"ci", "secret", "config"}),
        ("mongodb 和 mysql 区别", set()),  # asks in general
        ("what is redis", set()),
        ("how does GitHub Actions caching work", set()),
        ("k8s namespace 是什么", set()),
        ("帮我把 redis 的连接池配置改成从环境变量读，顺便加个超时", set()),  # not short
    ],
)
def test_only_short_prompts_that_ask_nothing_in_general_look_up(prompt: str, names: set[str]) -> None:
    from memself.recall.entities import lookup_identifiers

    assert lookup_identifiers(prompt) == names


def test_fuse_spares_only_the_named_memories_share_of_the_penalty() -> None:
    from memself.recall.scoring import fuse

    dense = np.array([0.4, 0.4], dtype=np.float32)
    group = np.array([1, 1], dtype=np.int8)  # project facts
    zero = np.zeros(2, dtype=np.float32)
    spared = np.array([0.5, 0.0], dtype=np.float32)
    out = fuse(dense, zero, group, 0.8, {}, {"project": 0.5, "rule": 1.0}, spared)
    assert out == pytest.approx([0.4 - 0.5 * 0.8 * 0.5, 0.4 - 0.5 * 0.8])
    assert fuse(dense, zero, group, 0.8, {}, {"project": 0.5, "rule": 1.0}) == pytest.approx([0.0, 0.0])


def test_pool_marks_the_memories_that_name_an_identifier() -> None:
    from memself.recall.pool import RecallPool

    pool = RecallPool(
        [
            Memory.create("生产 MongoDB 是三节点副本集", "project", NOW),
            Memory.create("Redis 只存会话", "project", NOW),
            Memory.create("提交信息用 Conventional Commits", "rule", NOW),
        ]
    )
    assert pool.entity_mask(frozenset({"mongodb"})).tolist() == [1.0, 0.0, 0.0]
    assert pool.entity_mask(frozenset({"mongodb", "redis"})).tolist() == [1.0, 1.0, 0.0]
    assert pool.entity_mask(frozenset()).tolist() == [0.0, 0.0, 0.0]


# A team's project facts and a rule, and prompts none of the case sets in eval/ hold.
FACTS = [
    ("project", "生产库是 MongoDB 三节点副本集，连接串放在 Apollo 的 ledger-core 配置里，账号找 DBA 开。"),
    ("project", "Redis 在这个项目里只存登录会话和接口限流计数，别往里放业务数据。"),
    ("project", "CI 跑在 GitHub Actions，部署用的 secrets 配在仓库的 production environment 下。"),
    ("project", "服务都部署在 EKS 上，k8s 的 namespace 是 ledger-prod 和 ledger-staging。"),
    ("project", "对账任务每天 02:30 由 Airflow 调度，失败会发到飞书的 ledger-alert 群。"),
    ("rule", "提交信息用 Conventional Commits 格式，scope 写模块名。"),
]
LOOKUPS = [("airflow?", 4), ("k8s ns 叫啥", 3), ("redis 存什么", 1), ("GHA secret 在哪", 2)]
GENERAL = ["mongodb 和 mysql 区别", "what is redis", "k8s namespace 是什么", "GitHub Actions vs Jenkins"]


@pytest.fixture(scope="module")
def team(e5_encoder, tmp_path_factory):  # type: ignore[no-untyped-def]
    from memself.recall.calibration import load_calibration
    from memself.recall.gate import GateParams
    from memself.recall.memory_side import encode_memories
    from memself.recall.scoring import load_recaller

    recaller = load_recaller(e5_encoder, OFFLINE_MODEL, tmp_path_factory.mktemp("space"))
    memories = [Memory.create(text, group, NOW) for group, text in FACTS]
    matrix = encode_memories(e5_encoder, [m.text for m in memories])
    cal = load_calibration(OFFLINE_MODEL)
    assert cal is not None
    return recaller, memories, matrix, GateParams(dict(cal.floors), -1.0, 3)


def recalled(team, prompt: str) -> list[int]:  # type: ignore[no-untyped-def]
    recaller, memories, matrix, params = team
    ids = {h.id for h in recaller.recall(prompt, memories, matrix, params).groups["project"].hits}
    return [i for i, m in enumerate(memories) if m.id in ids]


def test_the_named_fact_pays_part_of_the_penalty_the_others_pay_in_full(team) -> None:  # type: ignore[no-untyped-def]
    recaller, memories, matrix, _ = team
    relief = recaller.scoring.entity_relief
    assert 0.0 < relief < 1.0
    for prompt, named in LOOKUPS:
        parts = recaller.parts(prompt, memories, matrix)
        assert parts.general > 0.0
        want = np.zeros(len(memories), dtype=np.float32)
        want[named] = relief
        assert parts.entity.tolist() == pytest.approx(want.tolist()), prompt
    for prompt in GENERAL:
        assert not recaller.parts(prompt, memories, matrix).entity.any(), prompt


def test_short_lookups_naming_a_fact_recall_it(team) -> None:  # type: ignore[no-untyped-def]
    found = {prompt: recalled(team, prompt) for prompt, _ in LOOKUPS}
    assert all(want in found[prompt] for prompt, want in LOOKUPS), found


def test_general_questions_about_the_same_tools_recall_no_fact(team) -> None:  # type: ignore[no-untyped-def]
    found = {prompt: recalled(team, prompt) for prompt in GENERAL}
    assert all(not hits for hits in found.values()), found


def test_a_reloaded_pool_reads_only_new_texts() -> None:
    from memself.recall import entities
    from memself.recall.pool import RecallPool

    known: dict[str, frozenset[str]] = {}
    first = [Memory.create("Redis 只存会话", "project", NOW), Memory.create("MongoDB 三节点", "project", NOW)]
    assert RecallPool(first).entity_mask(frozenset({"redis"}), known).tolist() == [1.0, 0.0]
    assert set(known) == {m.text for m in first}
    read: list[str] = []
    original = entities.identifiers

    def counting(text: str) -> frozenset[str]:
        read.append(text)
        return original(text)

    entities.identifiers = counting  # type: ignore[assignment]
    try:
        second = [first[0], Memory.create("k8s namespace 是 ledger-prod", "project", NOW)]
        mask = RecallPool(second).entity_mask(frozenset({"kubernetes"}), known)
    finally:
        entities.identifiers = original  # type: ignore[assignment]
    assert mask.tolist() == [0.0, 1.0]
    assert read == ["k8s namespace 是 ledger-prod"]
    assert set(known) == {m.text for m in second}  # the dropped memory's entry is gone


def test_verify_counts_the_relief_as_recall_gates_it(team) -> None:  # type: ignore[no-untyped-def]
    """The calibration's counting (``Block.entity``) and the gate in ``memself verify`` agree on a
    set whose lookups need the relief."""
    from memself.recall import fitting as cal
    from memself.verify.cases import parse_cases
    from memself.verify.run import run_cases

    recaller, _, _, params = team
    cases = parse_cases(
        {
            "memories": [{"key": f"m{i}", "group": g, "text": t} for i, (g, t) in enumerate(FACTS)],
            "relevant": [{"prompt": p, "expect": [f"m{i}"]} for p, i in LOOKUPS],
            "irrelevant": [{"prompt": p} for p in GENERAL],
        },
        "lookups.json",
    )
    res = run_cases(cases, recaller, params, NOW)
    assert res.scores is not None and res.scores.pool.entity is not None
    assert res.scores.pool.entity[: len(LOOKUPS)].any(axis=1).all()  # every lookup is relieved
    assert not res.scores.pool.entity[len(LOOKUPS) :].any()  # no general question is
    general = recaller.scoring.general
    clf = cal.Classifier(np.asarray(general.weights), general.bias, general.words, general.word_scale)
    counted = cal.count_set(
        res.scores,
        cal.Params(
            recaller.scoring.lexical, general.penalty, params.floors, recaller.scoring.view_offset, clf
        ),
        False,
    )
    for g in ("rule", "project"):
        gated = res.groups[g]
        assert (counted[g].hits, counted[g].leaks) == (gated.hits, gated.leaks), g
    assert res.groups["project"].hits == len(LOOKUPS) and res.groups["project"].leaks == 0
