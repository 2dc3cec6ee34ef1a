"""The per-group gate (original section 2.3) and the Recaller's bookkeeping, on synthetic scores."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memself.model.catalog import MODELS, OFFLINE_MODEL
from memself.recall.background import RecallSpace, build_space
from memself.recall.gate import GateParams, gate, gate_explained
from memself.recall.scoring import Recaller, ScoringSettings, query_views
from memself.store.records import Memory

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def pairs(*scores: float) -> list[tuple[str, float]]:
    return [(f"m{i}", s) for i, s in enumerate(scores)]


# ----------------------------------------------------------------------------------- the gate


def test_below_floor_returns_nothing() -> None:
    out = gate_explained(pairs(0.21, 0.1), floor=0.22, margin=-1, top_k=3)
    assert out.kept == [] and out.reason == "below-floor" and out.top1 == pytest.approx(0.21)


def test_top1_exactly_at_floor_passes() -> None:
    assert gate(pairs(0.22), floor=0.22, margin=-1, top_k=3) == [("m0", 0.22)]


def test_line_is_max_of_floor_and_relative_top1() -> None:
    # top1 0.5: relative line 0.30 beats the floor 0.22, so 0.29 is cut although above the floor.
    out = gate_explained(pairs(0.5, 0.31, 0.29), floor=0.22, margin=-1, top_k=3)
    assert out.line == pytest.approx(0.30)
    assert [k for k, _ in out.kept] == ["m0", "m1"]
    # top1 0.3: relative line 0.18 is under the floor, so the floor is the line.
    out = gate_explained(pairs(0.3, 0.23, 0.21), floor=0.22, margin=-1, top_k=3)
    assert out.line == pytest.approx(0.22)
    assert [k for k, _ in out.kept] == ["m0", "m1"]


def test_top_k_is_a_cap_not_a_quota() -> None:
    assert [k for k, _ in gate(pairs(0.5, 0.49, 0.48, 0.47), 0.2, -1, 2)] == ["m0", "m1"]
    assert [k for k, _ in gate(pairs(0.5, 0.1), 0.2, -1, 5)] == ["m0"]


def test_unsorted_input_is_ranked() -> None:
    assert [k for k, _ in gate([("a", 0.3), ("b", 0.6), ("c", 0.5)], 0.2, -1, 2)] == ["b", "c"]


def test_floor_off_keeps_relative_line_only() -> None:
    out = gate_explained(pairs(0.1, 0.07, 0.05), floor=-1, margin=0.0, top_k=3)
    # margin 0 is "on" (>= 0): the relative line 0.06 applies, no absolute floor.
    assert out.reason == "line" and out.line == pytest.approx(0.06)
    assert [k for k, _ in out.kept] == ["m0", "m1"]


def test_floor_and_margin_off_is_plain_top_k() -> None:
    out = gate_explained(pairs(0.01, -0.2, 0.005, -0.3), floor=-1, margin=-1, top_k=3)
    assert out.reason == "top-k" and out.line is None
    assert [k for k, _ in out.kept] == ["m0", "m2", "m1"]


def test_margin_gate_closes_the_group() -> None:
    out = gate_explained(pairs(0.50, 0.47), floor=0.22, margin=0.05, top_k=3)
    assert out.kept == [] and out.reason == "margin"
    # Far enough ahead: normal line applies.
    assert [k for k, _ in gate(pairs(0.50, 0.40), 0.22, 0.05, 3)] == ["m0", "m1"]


def test_margin_with_single_candidate_uses_zero_as_top2() -> None:
    assert gate(pairs(0.30), floor=0.22, margin=0.25, top_k=3) == [("m0", 0.30)]
    assert gate(pairs(0.24), floor=0.22, margin=0.25, top_k=3) == []


def test_empty_pool() -> None:
    out = gate_explained([], 0.22, -1, 3)
    assert out.kept == [] and out.reason == "empty" and out.top1 is None


# ------------------------------------------------------------------------------ the recaller


class TableEncoder:
    """Deterministic encoder: a fixed vector per known text (unit norm), for gate bookkeeping."""

    model_id = "test:table"
    dim = 4

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()}

    def encode_queries(self, texts):
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, 4), np.float32)

    encode_passages = encode_queries


def plain_recaller(table: dict[str, list[float]]) -> Recaller:
    space = RecallSpace("test:table", np.zeros(4, np.float32), np.zeros((0, 4), np.float32))
    return Recaller(TableEncoder(table), space, ScoringSettings())


def memory(text: str, group: str, **kw: object) -> Memory:
    m = Memory.create(text, group, NOW)
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def test_groups_are_gated_independently_and_deprecated_excluded() -> None:
    table = {
        "query text": [1, 0, 0, 0],
        "rule close": [0.9, 0.1, 0, 0],  # cos ~0.99
        "rule deprecated": [1, 0, 0, 0],  # would be the best rule
        "project weak": [0.3, 1, 0, 0],  # cos ~0.29
        "project weaker": [0.2, 1, 0, 0],  # cos ~0.196
    }
    rec = plain_recaller(table)
    mems = [
        memory("rule close", "rule"),
        memory("rule deprecated", "rule", deprecated=True),
        memory("project weak", "project"),
        memory("project weaker", "project"),
    ]
    matrix = rec.encoder.encode_passages([m.text for m in mems])
    res = rec.recall("query text", mems, matrix, GateParams({"rule": 0.5, "project": 0.25}))
    rule = res.groups["rule"]
    assert [h.text for h in rule.hits] == ["rule close"]
    assert rule.candidates == 1  # the deprecated one never entered the pool
    project = res.groups["project"]
    # project's own top1 (0.29) passes its own floor 0.25 though it is far under rule's floor,
    # and the relative line 0.6 x 0.29 = 0.17 is under the floor, so the floor cuts 0.196.
    assert [h.text for h in project.hits] == ["project weak"]
    assert project.line == pytest.approx(0.25)
    assert res.hit_ids == [mems[0].id, mems[2].id]
    js = res.to_json()
    assert set(js) == {"rule", "project"}
    assert set(js["rule"][0]) == {"id", "text", "score", "confidence"}
    assert js["rule"][0]["confidence"] == 0.5


def test_low_confidence_memory_is_not_active() -> None:
    rec = plain_recaller({"q": [1, 0, 0, 0], "faded memory": [1, 0, 0, 0]})
    mems = [memory("faded memory", "rule", confidence=0.4)]
    res = rec.recall(
        "q", mems, rec.encoder.encode_passages(["faded memory"]), GateParams({"rule": -1, "project": -1})
    )
    assert res.groups["rule"].hits == [] and res.groups["rule"].candidates == 0


def test_rows_map_memories_to_matrix_rows() -> None:
    table = {"q": [1, 0, 0, 0], "a": [1, 0, 0, 0], "b": [0, 1, 0, 0]}
    rec = plain_recaller(table)
    mems = [memory("bbbbbb", "rule"), memory("aaaaaa", "rule")]
    matrix = rec.encoder.encode_passages(["a", "b"])  # row 0 = a, row 1 = b
    ranked = rec.ranked("q", mems, matrix, rows=[1, 0])
    assert [m.text for m, _ in ranked] == ["aaaaaa", "bbbbbb"]
    assert ranked[0][1] == pytest.approx(1.0)
    assert len(rec.top_k("q", mems, matrix, 1, rows=[1, 0])) == 1


def test_space_projection_matches_explicit_centring() -> None:
    rng = np.random.default_rng(7)
    background = rng.normal(size=(30, 16)).astype(np.float32)
    space = build_space("m", background, dims=3)
    assert space.components.shape == (3, 16)
    assert np.allclose(space.components @ space.components.T, np.eye(3), atol=1e-5)
    rows = rng.normal(size=(5, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    query = rng.normal(size=16).astype(np.float32)

    class Enc:
        model_id, dim = "m", 16

        def encode_queries(self, texts):
            return np.stack([query for _ in texts])

        encode_passages = encode_queries

    rec = Recaller(Enc(), space, ScoringSettings(space_dims=3))
    fast = rec.dense_scores("x", rows, matrix_key="gen-1")
    explicit = space.project(rows) @ space.project(query[None, :])[0]
    assert np.allclose(fast, explicit, atol=1e-5)
    # Cached norms under the same key give the same answer; a new key recomputes.
    assert np.allclose(rec.dense_scores("x", rows, matrix_key="gen-1"), explicit, atol=1e-5)
    other = rows[::-1].copy()
    assert np.allclose(rec.dense_scores("x", other, matrix_key="gen-2"), explicit[::-1], atol=1e-5)


def test_query_views_split_sentences_only_when_asked() -> None:
    text = "派单现在是同步处理的。你看这个方案行不行？"
    assert query_views(text, False) == [text]
    assert query_views(text, True) == [text, "派单现在是同步处理的", "你看这个方案行不行"]
    assert query_views("只有一句话而已", True) == ["只有一句话而已"]


def test_offline_model_has_calibration() -> None:
    scoring = ScoringSettings.from_model(MODELS[OFFLINE_MODEL])
    assert scoring.symmetric and scoring.general_space and scoring.uses_lexical
    assert ScoringSettings.for_model_id("not/in-table-model").space_dims == 0


def test_lexical_fusion_only_for_weighted_groups_and_pool_reuse() -> None:
    from memself.recall.pool import RecallPool

    # Same dense vector everywhere: any score difference is the lexical part.
    same = [1.0, 0, 0, 0]
    table = {"帮我写个 Dockerfile": same}
    rec = Recaller(
        TableEncoder(table),
        RecallSpace("t", np.zeros(4, np.float32), np.zeros((0, 4), np.float32)),
        ScoringSettings(lexical={"rule": 0.4, "project": 0.0}),
    )
    mems = [
        memory("写 Dockerfile 用多阶段构建", "rule"),
        memory("回答里不要用 emoji 表情", "rule"),
        memory("镜像的 Dockerfile 在 deploy 目录", "project"),
    ]
    pool = RecallPool(mems)
    matrix = np.stack([np.asarray(same, np.float32)] * 3)
    fused, dense = rec.score("帮我写个 Dockerfile", pool, matrix)
    assert np.allclose(dense, 1.0)
    assert fused[0] > 1.0 + 0.05  # shares the rare word "dockerfile"
    assert fused[1] == pytest.approx(1.0)  # shares nothing
    assert fused[2] == pytest.approx(1.0)  # project: weight 0, although it shares the word
    # The pool keeps its lexical index: a second prompt reuses it and gives the same numbers.
    again, _ = rec.score("帮我写个 Dockerfile", pool, matrix)
    assert np.allclose(again, fused)
    top = rec.top_k("帮我写个 Dockerfile", pool, matrix, 1, group="rule")
    assert [m.text for m, _ in top] == ["写 Dockerfile 用多阶段构建"]


def test_list_pools_are_reused_and_tokens_carried_over(monkeypatch: pytest.MonkeyPatch) -> None:
    import memself.recall.lexical as lexical

    calls: list[str] = []
    real = lexical.tokens
    monkeypatch.setattr(lexical, "tokens", lambda text: calls.append(text) or real(text))
    same = [1.0, 0, 0, 0]
    rec = Recaller(
        TableEncoder({"写个 Dockerfile": same}),
        RecallSpace("t", np.zeros(4, np.float32), np.zeros((0, 4), np.float32)),
        ScoringSettings(lexical={"rule": 0.5, "project": 0.0}, lexical_tau=10.0),
    )
    mems = [memory("写 Dockerfile 用多阶段构建", "rule"), memory("回答里不要用 emoji 表情", "rule")]
    matrix = np.stack([np.asarray(same, np.float32)] * 3)
    params = GateParams({"rule": 0.0, "project": 0.0})
    rec.recall("写个 Dockerfile", mems, matrix, params)
    memory_calls = [c for c in calls if c != "写个 Dockerfile"]
    assert sorted(memory_calls) == sorted(m.text for m in mems)
    first_pool = rec._pool
    rec.recall("写个 Dockerfile", mems, matrix, params)
    assert rec._pool is first_pool  # same objects, same rows: nothing rebuilt
    calls.clear()
    # A reload: new objects (one deprecated, one new text). Only the new text is tokenised.
    reloaded = [
        memory("写 Dockerfile 用多阶段构建", "rule"),
        memory("回答里不要用 emoji 表情", "rule", deprecated=True),
        memory("Dockerfile 基础镜像固定版本号", "rule"),
    ]
    res = rec.recall("写个 Dockerfile", reloaded, matrix, params)
    assert rec._pool is not first_pool
    assert [c for c in calls if c != "写个 Dockerfile"] == ["Dockerfile 基础镜像固定版本号"]
    assert res.groups["rule"].candidates == 2  # the deprecated one is out


def test_space_is_cached_and_rebuilt_on_request(tmp_path) -> None:
    import hashlib

    from memself.recall.background import load_space

    class HashEncoder:
        model_id, dim = "test:hash", 8

        def __init__(self) -> None:
            self.calls = 0

        def encode_queries(self, texts):
            self.calls += 1
            rows = [
                np.frombuffer(hashlib.sha256(t.encode()).digest()[:32], dtype=np.uint8)[:8].astype(np.float32)
                - 127.5
                for t in texts
            ]
            v = np.stack(rows)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

        encode_passages = encode_queries

    enc = HashEncoder()
    first = load_space(enc, 3, True, tmp_path)
    assert first.components.shape == (3, 8) and enc.calls == 1
    again = load_space(enc, 3, True, tmp_path)
    assert enc.calls == 1 and np.allclose(again.mean, first.mean)
    assert np.allclose(again.components, first.components)
    load_space(enc, 3, True, tmp_path, rebuild=True)
    assert enc.calls == 2
    # A different number of directions is a different cache entry.
    other = load_space(enc, 2, True, tmp_path)
    assert other.components.shape == (2, 8) and enc.calls == 3
