"""appliesWhen views: the index keeps a row per request and follows changes; recall scores a memory
against its text and each request; a memory without requests scores and is gated as before."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from memself.index.sync import VectorIndex, view_row_id
from memself.recall.background import RecallSpace
from memself.recall.calibration import GeneralQuestion
from memself.recall.gate import GateParams, gate_explained
from memself.recall.pool import RecallPool, indexed_pool
from memself.recall.scoring import Recaller, ScoringSettings
from memself.store.records import Memory
from tests.test_vector_index import FakeEncoder

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


@dataclass
class Mem:
    id: str
    text: str
    appliesWhen: tuple[str, ...] = field(default_factory=tuple)


class ViewsEncoder(FakeEncoder):
    """A memory-side encoder whose recall scores views (``views``, as ``MemorySideEncoder`` says)."""

    def __init__(self, views: bool = True, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.views = views


# ------------------------------------------------------------------------------------- index


def test_views_get_rows_and_follow_their_memory(tmp_path: Path) -> None:
    idx = VectorIndex.load(tmp_path / "index")
    enc = ViewsEncoder()
    memories = [
        Mem("m1", "数据库时间一律存 UTC", ("记一下取件时间落表", "加个创建时间字段")),
        Mem("m2", "回答一律用中文"),
    ]
    res = idx.sync(memories, enc)
    assert res.encoded == 4
    assert set(idx.ids) == {"m1", view_row_id("m1", 0), view_row_id("m1", 1), "m2"}
    # One request changed: only it is encoded again; the text row and the other request stay.
    enc.seen.clear()
    memories[0] = Mem("m1", "数据库时间一律存 UTC", ("记一下取件时间落表", "订单表加个过期时间"))
    res = idx.sync(memories, enc)
    assert enc.seen == ["订单表加个过期时间"] and res.encoded == 1
    # Requests dropped: their rows go, nothing is encoded.
    enc.seen.clear()
    memories[0] = Mem("m1", "数据库时间一律存 UTC")
    res = idx.sync(memories, enc)
    assert enc.seen == [] and set(idx.ids) == {"m1", "m2"}
    # The memory itself removed with its requests back: every row of it goes.
    idx.sync([Mem("m1", "数据库时间一律存 UTC", ("x 请求",)), Mem("m2", "回答一律用中文")], enc)
    idx.sync([Mem("m2", "回答一律用中文")], enc)
    assert idx.ids == ["m2"]
    # The index on disk is what a fresh reader sees.
    assert VectorIndex.load(tmp_path / "index").ids == ["m2"]


def test_a_model_that_does_not_score_views_keeps_no_view_rows(tmp_path: Path) -> None:
    idx = VectorIndex.load(tmp_path / "index")
    memories = [Mem("m1", "数据库时间一律存 UTC", ("记一下取件时间落表",))]
    idx.sync(memories, ViewsEncoder(views=False))
    assert idx.ids == ["m1"]
    # Turned on (a calibration that scores views): the requests are added without re-encoding
    # the text; turned off again: dropped.
    enc = ViewsEncoder()
    idx.sync(memories, enc)
    assert enc.seen == ["记一下取件时间落表"] and len(idx) == 2
    idx.sync(memories, ViewsEncoder(views=False))
    assert idx.ids == ["m1"]


def test_a_view_that_fails_to_encode_is_left_out_and_retried(tmp_path: Path) -> None:
    idx = VectorIndex.load(tmp_path / "index")
    memories = [Mem("m1", "数据库时间一律存 UTC", ("坏请求", "加个创建时间字段"))]
    res = idx.sync(memories, ViewsEncoder(fail_on="坏"))
    assert res.failed == [view_row_id("m1", 0)]
    # The memory is in the pool with the one request that has a vector.
    m = memory("数据库时间一律存 UTC", "rule", ("坏请求", "加个创建时间字段"))
    m.id = "m1"
    pool = indexed_pool([m], idx)
    assert pool.view_texts == [("加个创建时间字段",)] and bool(pool.has_views[0])
    res = idx.sync(memories, ViewsEncoder())
    assert res.encoded == 1 and len(idx) == 3


# ----------------------------------------------------------------------------------- scoring


def memory(text: str, group: str, applies: tuple[str, ...] = ()) -> Memory:
    m = Memory.create(text, group, NOW)
    m.appliesWhen = applies
    return m


TABLE = {
    "帮我把快递员取件时间落到表里": [1.0, 0.2, 0.0, 0.0],
    "数据库时间一律存 UTC": [0.1, 1.0, 0.0, 0.0],
    "记一下取件时间落表": [1.0, 0.25, 0.0, 0.05],
    "回答一律用中文": [0.0, 0.0, 1.0, 0.0],
    "给接口加个限流": [0.0, 0.0, 0.3, 1.0],
    "支付页灰度开关是 pay_new_flow": [0.3, 0.0, 0.0, 1.0],
}


class TableEncoder:
    model_id, dim = "test:table", 4

    def encode_queries(self, texts):
        rows = [np.asarray(TABLE[t], np.float32) for t in texts]
        v = np.stack(rows) if rows else np.zeros((0, 4), np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    encode_passages = encode_queries


def recaller(**scoring: object) -> Recaller:
    space = RecallSpace("test:table", np.zeros(4, np.float32), np.zeros((0, 4), np.float32))
    return Recaller(TableEncoder(), space, ScoringSettings(**scoring))  # type: ignore[arg-type]


def matrix_and_pool(memories: list[Memory]) -> tuple[np.ndarray, RecallPool]:
    texts = [m.text for m in memories]
    views = []
    for m in memories:
        views.append(list(range(len(texts), len(texts) + len(m.appliesWhen))))
        texts += list(m.appliesWhen)
    return TableEncoder().encode_queries(texts), RecallPool(memories, range(len(memories)), views)


VIEWS = {
    "applies_when": True,
    "applies_when_lexical": True,
    "view_offset": {"rule": 0.1, "project": 0.05},
    "lexical": {"rule": 0.5, "project": 0.0},
    "lexical_tau": 10.0,
}
PROMPT = "帮我把快递员取件时间落到表里"


def test_a_memory_is_scored_by_its_best_view_and_must_clear_the_offset() -> None:
    utc = memory("数据库时间一律存 UTC", "rule", ("记一下取件时间落表",))
    chinese = memory("回答一律用中文", "rule")
    matrix, pool = matrix_and_pool([utc, chinese])
    rec = recaller(**VIEWS)
    parts = rec.parts(PROMPT, pool, matrix)
    assert parts.dense[0] > parts.dense_text[0] + 0.3  # the request is far closer than the text
    assert parts.lexical[0] > parts.lexical_text[0]  # and shares words the text does not
    assert int(parts.best_view[0]) == 1
    res = rec.recall(PROMPT, pool, matrix, GateParams({"rule": 0.5, "project": 0.5}))
    (hit,) = res.groups["rule"].hits
    assert hit.id == utc.id and hit.via == "记一下取件时间落表" and hit.offset == pytest.approx(0.1)
    # The line is raised by the offset for it: just under floor + offset, it is not recalled.
    score = hit.score
    res = rec.recall(PROMPT, pool, matrix, GateParams({"rule": score - 0.05, "project": 0.5}))
    assert res.groups["rule"].hits == [] and res.groups["rule"].reason == "below-floor"
    # Without views scored (a model whose calibration does not), the text alone counts.
    plain = recaller(**{**VIEWS, "applies_when": False})
    assert plain.parts(PROMPT, pool, matrix).dense[0] == pytest.approx(parts.dense_text[0])
    assert not plain.extra_floors(pool).any()


def test_a_memory_without_views_scores_and_gates_exactly_as_before() -> None:
    fact = memory("支付页灰度开关是 pay_new_flow", "project")
    rule = memory("回答一律用中文", "rule")
    with_views = [memory("数据库时间一律存 UTC", "rule", ("记一下取件时间落表",)), fact, rule]
    without = [memory("数据库时间一律存 UTC", "rule"), fact, rule]
    general = GeneralQuestion((0.5, -0.2, 0.1, 0.3), -0.4, {"rule": 1.0, "project": 0.4})
    rec = recaller(**VIEWS, general=general, general_question=True)
    old = recaller(lexical={"rule": 0.5, "project": 0.0}, lexical_tau=10.0, general=general)
    for prompt in (PROMPT, "给接口加个限流"):
        m1, p1 = matrix_and_pool(with_views)
        m2, p2 = matrix_and_pool(without)
        f1 = rec.fused(rec.parts(prompt, p1, m1), p1)
        f2 = old.fused(old.parts(prompt, p2, m2), p2)
        assert f1[1:] == pytest.approx(f2[1:], abs=0)  # bit for bit
        assert list(rec.extra_floors(p1)) == pytest.approx([0.1, 0.0, 0.0])


def test_dedup_neighbours_ignore_views_and_the_penalty() -> None:
    utc = memory("数据库时间一律存 UTC", "rule", ("记一下取件时间落表",))
    matrix, pool = matrix_and_pool([utc, memory("回答一律用中文", "rule")])
    general = GeneralQuestion((1.0, 1.0, 1.0, 1.0), 3.0, {"rule": 1.0, "project": 1.0})
    rec = recaller(**VIEWS, general=general, general_question=True)
    plain = recaller(lexical={"rule": 0.5, "project": 0.0}, lexical_tau=10.0)
    got = rec.top_k(PROMPT, pool, matrix, 2)
    want = plain.top_k(PROMPT, RecallPool(pool.memories), matrix[:2], 2)
    assert [(m.id, round(s, 6)) for m, s in got] == [(m.id, round(s, 6)) for m, s in want]


def test_general_question_penalty_is_per_group() -> None:
    fact = memory("支付页灰度开关是 pay_new_flow", "project")
    rule = memory("回答一律用中文", "rule")
    matrix, pool = matrix_and_pool([fact, rule])
    general = GeneralQuestion((0.0, 0.0, 0.0, 0.0), 50.0, {"rule": 1.0, "project": 0.4})  # P = 1
    rec = recaller(general=general, general_question=True)
    base = recaller()
    diff = base.fused(base.parts(PROMPT, pool, matrix), pool) - rec.fused(
        rec.parts(PROMPT, pool, matrix), pool
    )
    assert diff == pytest.approx([0.4, 1.0])


# --------------------------------------------------------------------------------------- gate


def test_gate_extra_floor_is_per_item_and_off_with_the_floor() -> None:
    pool = [("view-memory", 0.49), ("plain", 0.35), ("low", 0.10)]
    extra = {"view-memory": 0.2, "plain": 0.0, "low": 0.0}.__getitem__
    # The view memory must reach 0.3 + 0.2: it does not; the plain one reaches 0.3 and the
    # relative line 0.6 x 0.49 < 0.3.
    out = gate_explained(pool, 0.3, -1, 3, extra)
    assert [k for k, _ in out.kept] == ["plain"] and out.line == pytest.approx(0.3)
    # Nothing reaches its own floor: the group is closed as below the floor.
    out = gate_explained(pool, 0.36, -1, 3, extra)
    assert out.kept == [] and out.reason == "below-floor"
    # Floor off (relative line only): no extra applies.
    out = gate_explained(pool, -1, 0.0, 3, extra)
    assert [k for k, _ in out.kept] == ["view-memory", "plain"]
    # Without extras the gate is the original's.
    assert gate_explained(pool, 0.3, -1, 3).kept == gate_explained(pool, 0.3, -1, 3, lambda _: 0.0).kept


def test_scoring_settings_replace_keeps_views_off_by_default() -> None:
    s = ScoringSettings()
    assert not s.applies_when and s.general is None and s.view_offset == {"rule": 0.0, "project": 0.0}
    assert replace(s, applies_when=True).applies_when
