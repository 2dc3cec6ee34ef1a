"""The per-model calibration file: read for exactly its model, never for another; and the
calibration procedure (counting by reduction, the classifier, leave-one-set-out) on synthetic sets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memself.errors import CorruptFile
from memself.model.catalog import DEFAULT_MODEL, MODELS, OFFLINE_MODEL, ModelSettings, resolve_model
from memself.recall import fitting as cal
from memself.recall.calibration import FORMAT, VERSION, calibration_dir, file_name, load_calibration
from memself.recall.gate import RELATIVE, default_floors, gate_explained
from memself.recall.memory_side import memory_side
from memself.recall.scoring import ScoringSettings
from memself.store.records import GROUPS

# ------------------------------------------------------------------------- per-model isolation


def test_the_offline_model_has_its_file_and_uses_it() -> None:
    got = load_calibration(OFFLINE_MODEL)
    assert got is not None and got.source == calibration_dir() / "multilingual-e5-small.json"
    raw = json.loads(got.source.read_text(encoding="utf-8"))
    assert default_floors(MODELS[OFFLINE_MODEL]) == pytest.approx(raw["floors"])
    scoring = ScoringSettings.from_model(MODELS[OFFLINE_MODEL])
    assert scoring.symmetric and scoring.uses_lexical
    if raw["scoring"].get("general_question"):
        assert scoring.general is not None
        width = MODELS[OFFLINE_MODEL].dim + (2 if scoring.general_shape else 0)
        assert len(scoring.general.weights) == width + len(scoring.general.words)
        assert bool(scoring.general.words) == (scoring.general_words > 0)


@pytest.mark.parametrize(
    "model",
    [
        DEFAULT_MODEL,  # the default bge model: the original's floors, plain cosine
        "intfloat/multilingual-e5-small",  # the offline model's full-precision twin
        "someone/multilingual-e5-small",  # a hub id that ends like it
    ],
)
def test_no_other_model_gets_the_offline_models_numbers(model: str) -> None:
    settings = resolve_model(model)
    assert load_calibration(settings.model_id) is None
    assert default_floors(settings) == {"rule": settings.rule_floor, "project": settings.project_floor}
    assert ScoringSettings.from_model(settings) == ScoringSettings()


def test_a_local_folder_named_like_the_offline_model_gets_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "multilingual-e5-small"
    folder.mkdir()
    settings = resolve_model(str(folder))
    assert settings.kind == "local"
    assert load_calibration(settings.model_id) is None
    assert ScoringSettings.from_model(settings) == ScoringSettings()
    assert default_floors(settings) == {"rule": 0.22, "project": 0.29}


def test_a_file_naming_another_model_is_not_used(tmp_path: Path) -> None:
    # The offline model's file copied under the twin's name: it names its own model, so it is
    # not the twin's calibration.
    source = (calibration_dir() / file_name(OFFLINE_MODEL)).read_text(encoding="utf-8")
    twin = "intfloat/multilingual-e5-small"
    (tmp_path / file_name(twin)).write_text(source, encoding="utf-8")
    assert file_name(twin) == "intfloat--multilingual-e5-small.json"
    assert load_calibration(twin, tmp_path) is None
    assert load_calibration(OFFLINE_MODEL, tmp_path) is None  # not this folder's file name


def test_a_broken_file_is_an_error_not_a_silent_default(tmp_path: Path) -> None:
    path = tmp_path / file_name("acme/model-x")
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(CorruptFile, match="召回校准文件"):
        load_calibration("acme/model-x", tmp_path)
    path.write_text(
        json.dumps({"format": FORMAT, "version": VERSION, "model": "acme/model-x", "floors": {"rule": 0.3}}),
        encoding="utf-8",
    )
    with pytest.raises(CorruptFile, match="floors"):
        load_calibration("acme/model-x", tmp_path)


def test_views_rows_follow_the_models_calibration() -> None:
    class Enc:
        dim = 4

        def __init__(self, model_id: str) -> None:
            self.model_id = model_id

    offline = memory_side(Enc(OFFLINE_MODEL))  # type: ignore[arg-type]
    raw = json.loads((calibration_dir() / file_name(OFFLINE_MODEL)).read_text(encoding="utf-8"))
    assert offline.views == bool(raw["scoring"].get("applies_when"))
    assert memory_side(Enc(DEFAULT_MODEL)).views is False  # type: ignore[arg-type]
    assert memory_side(Enc(DEFAULT_MODEL)).model_id == DEFAULT_MODEL  # type: ignore[arg-type]


def test_model_table_holds_no_calibrated_recall_numbers() -> None:
    # Calibrated numbers live in the data files; the table only has the generic floors.
    for settings in MODELS.values():
        assert isinstance(settings, ModelSettings)
        assert not hasattr(settings, "calibration")
    assert MODELS[OFFLINE_MODEL].rule_floor == MODELS[DEFAULT_MODEL].rule_floor


# ------------------------------------------------------------------------------ the procedure


def synthetic_set(name: str, seed: int, n_mem: int = 12, n_rel: int = 30, n_irr: int = 30) -> cal.SetScores:
    """Random scores with a signal: each relevant prompt's expected memory scores higher; the
    prompt vectors of unrelated prompts lean one way (what the classifier can learn)."""
    rng = np.random.default_rng(seed)
    group = np.array([i % 2 for i in range(n_mem)], dtype=np.int8)
    n = n_rel + n_irr
    dense_text = rng.normal(0.1, 0.1, size=(n, n_mem)).astype(np.float32)
    expect = []
    for i in range(n_rel):
        j = int(rng.integers(n_mem))
        dense_text[i, j] += 0.3
        expect.append(np.array([j], dtype=np.int64))
    dense = np.maximum(
        dense_text, dense_text + rng.normal(0.05, 0.05, size=dense_text.shape).astype(np.float32)
    )
    has_views = rng.random(n_mem) < 0.5
    dense = np.where(has_views[None, :], dense, dense_text).astype(np.float32)
    lexical_text = (rng.random((n, n_mem)) < 0.1).astype(np.float32) * 0.5
    vectors = rng.normal(size=(n, 8))
    vectors[n_rel:, 0] += 1.5
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def single_block(k: int, shift: float) -> cal.Block:
        d = rng.normal(0.1 + shift, 0.1, size=(k, 1)).astype(np.float32)
        v = rng.normal(size=(k, 8))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return cal.Block(d, d, np.zeros_like(d), np.zeros_like(d), v)

    return cal.SetScores(
        name=name,
        group=group,
        has_views=has_views,
        pool=cal.Block(dense_text, dense, lexical_text, lexical_text, vectors),
        n_relevant=n_rel,
        expect=expect,
        single_group=np.array([0, 1, 0, 1], dtype=np.int8),
        single_views=np.array([False, True, False, False]),
        single_rel=single_block(8, 0.3),
        single_rel_owner=np.repeat(np.arange(4), 2),
        single_irr=single_block(8, 0.0),
        single_irr_owner=np.repeat(np.arange(4), 2),
    )


LEX = {"rule": 0.5, "project": 0.0}


def test_counting_by_reduction_equals_the_gate() -> None:
    s = synthetic_set("a", 1)
    clf = cal.train_classifier([s])
    params = cal.Params(
        LEX,
        {"rule": 1.0, "project": 0.4},
        {"rule": 0.2, "project": 0.25},
        {"rule": 0.08, "project": 0.03},
        clf,
    )
    p = cal.probabilities(s, clf)
    for views in (False, True):
        t = cal.thresholds(s, params, views, p)
        dense = s.pool.dense if views else s.pool.dense_text
        fused = dense + np.array([LEX[g] for g in GROUPS])[s.group] * s.pool.lexical_text
        fused = fused - np.array([params.penalty[g] for g in GROUPS])[s.group] * p[0][:, None]
        extra = np.where(s.has_views & views, np.array([params.view_offset[g] for g in GROUPS])[s.group], 0.0)
        for code, g in enumerate(GROUPS):
            floor = params.floors[g]
            members = np.flatnonzero(s.group == code)
            hits = leaks = 0
            for i in range(len(s.pool)):
                pairs = [(int(j), float(fused[i, j])) for j in members]
                kept = {
                    j for j, _ in gate_explained(pairs, floor, -1, 3, lambda j, e=extra: float(e[j])).kept
                }
                if i < s.n_relevant:
                    want = {int(j) for j in s.expect[i] if s.group[j] == code}
                    hits += bool(want & kept)
                else:
                    leaks += bool(kept)
            c = cal.counts(t, g, floor)
            assert (c.hits, c.leaks) == (hits, leaks), (views, g)
    assert RELATIVE == 0.6


def test_classifier_learns_which_prompts_need_no_memory() -> None:
    sets = [synthetic_set(n, seed) for n, seed in (("a", 1), ("b", 2))]
    clf = cal.train_classifier(sets)
    held = synthetic_set("c", 3)
    p = clf.probability(held.pool)
    assert p[held.n_relevant :].mean() > p[: held.n_relevant].mean() + 0.2


def test_leave_one_out_never_sees_the_held_out_set() -> None:
    sets = [synthetic_set(n, seed) for n, seed in (("a", 1), ("b", 2), ("c", 3))]
    folds = cal.loso(sets, LEX)
    assert [f.held for f in folds] == ["a", "b", "c"]
    for f in folds:
        assert f.held not in f.calibration.sets and len(f.calibration.sets) == 2
    # Changing the held-out set's scores changes nothing about its fold's calibration.
    spoiled = [sets[0], sets[1], synthetic_set("c", 99)]
    again = cal.loso(spoiled, LEX)
    assert again[2].calibration.floors == folds[2].calibration.floors
    assert again[2].calibration.penalty == folds[2].calibration.penalty
    np.testing.assert_allclose(
        again[2].calibration.classifier.weights, folds[2].calibration.classifier.weights
    )
    # Views: the offset is the views floor minus the plain floor, and views counts exist.
    assert folds[0].views is not None
    c = folds[0].calibration
    assert c.views_floors is not None
    assert c.view_offset == pytest.approx({g: c.views_floors[g] - c.floors[g] for g in GROUPS})


def test_floors_respect_the_leak_limit_and_are_never_negative() -> None:
    sets = [synthetic_set(n, seed) for n, seed in (("a", 1), ("b", 2))]
    c = cal.calibrate(sets, LEX)
    assert all(f >= 0 for f in c.floors.values())
    # On the scores the floors were chosen on (each set scored by the classifier trained on the
    # other), the pooled leaks are within each group's limit.
    params = cal.params_of(c, LEX)
    leaks = {g: 0 for g in GROUPS}
    irrelevant = {g: 0 for g in GROUPS}
    for s, other in ((sets[0], sets[1]), (sets[1], sets[0])):
        t = cal.thresholds(s, params, False, cal.probabilities(s, cal.train_classifier([other])))
        for g in GROUPS:
            counts = cal.counts(t, g, c.floors[g])
            leaks[g] += counts.leaks
            irrelevant[g] += counts.irrelevant
    for g in GROUPS:
        assert leaks[g] <= cal.LEAK_LIMIT[g] * irrelevant[g]


def test_view_offsets_are_fitted_at_the_stricter_view_limits() -> None:
    """Memories with requests are held to their own, lower leak limits: with every memory scored
    with its views, the floors plus the view offsets leak within ``VIEW_LEAK_LIMIT``, pooled on
    the scores they were chosen on, and the limits are stricter than the plain ones."""
    assert all(cal.VIEW_LEAK_LIMIT[g] < cal.LEAK_LIMIT[g] for g in GROUPS)
    sets = [synthetic_set(n, seed) for n, seed in (("a", 1), ("b", 2))]
    c = cal.calibrate(sets, LEX)
    assert c.views_floors is not None
    zero = {g: 0.0 for g in GROUPS}
    params = cal.Params(LEX, c.penalty, zero, zero, None)
    leaks = {g: 0 for g in GROUPS}
    irrelevant = {g: 0 for g in GROUPS}
    for s, other in ((sets[0], sets[1]), (sets[1], sets[0])):
        t = cal.thresholds(s, params, True, cal.probabilities(s, cal.train_classifier([other])))
        for g in GROUPS:
            counts = cal.counts(t, g, c.floors[g] + c.view_offset[g])
            leaks[g] += counts.leaks
            irrelevant[g] += counts.irrelevant
    for g in GROUPS:
        assert leaks[g] <= cal.VIEW_LEAK_LIMIT[g] * irrelevant[g]
    # At the plain limits the same sets would have let more through (the limit decides).
    loose = cal.calibrate(sets, LEX, view_limits=cal.LEAK_LIMIT)
    assert loose.views_floors is not None
    assert any(loose.views_floors[g] < c.views_floors[g] for g in GROUPS)


# ------------------------------------------------------------------------------ prompt shapes


def test_prompt_length_in_words() -> None:
    from memself.recall.shape import detector_features, is_english, is_short, prompt_shapes, words

    assert [words(p) for p in ("pg?", "k8s ns", "redis for?", "CI secrets config")] == [1, 2, 2, 3]
    # A run of Chinese characters counts one word per two characters, rounded up.
    assert [words(p) for p in ("数据库用的啥", "mongo 连接串", "生产的 namespace 叫啥")] == [3, 3, 4]
    assert words("how do I get into the production database from my laptop") == 11
    assert is_short("GHA secrets?") and not is_short("where do reporting queries run today")
    assert is_english("what's redis for here") and not is_english("redis 干嘛的") and not is_english("？")
    assert detector_features("pg?") == (1.0, 0.0)
    assert detector_features("prod k8s ns?") == (0.0, 1.0)
    assert detector_features("how do I ship this to production") == (0.0, 0.0)
    assert prompt_shapes("k8s ns", ("shorthand",)) == ("short", "english", "shorthand")
    assert prompt_shapes("生产环境的数据库连接地址在哪里配置的") == ()


def test_the_detector_reads_the_prompts_length_when_calibrated_so() -> None:
    from memself.recall.calibration import GeneralQuestion
    from memself.recall.scoring import general_probability

    scoring = ScoringSettings.from_model(MODELS[OFFLINE_MODEL])
    dim = MODELS[OFFLINE_MODEL].dim
    assert scoring.general is not None
    width = dim + (2 if scoring.general_shape else 0)
    assert len(scoring.general.weights) == width + len(scoring.general.words)
    # The length weights move the probability; a vector of the wrong width is refused.
    weights = (0.0,) * dim + (-3.0, -1.0)
    general = GeneralQuestion(weights, 0.0, {"rule": 1.0, "project": 0.4})
    v = np.zeros((3, dim + 2))
    v[1, dim], v[2, dim + 1] = 1.0, 1.0
    p = general_probability(general, v, ["", "", ""])
    assert p[0] == pytest.approx(0.5) and p[1] < p[2] < p[0]
    with pytest.raises(CorruptFile):
        general_probability(general, np.zeros((1, dim)), [""])


def test_shape_counts_follow_the_floors() -> None:
    s = synthetic_set("a", 1)
    n = len(s.pool)
    s.shapes = [("short",) if i % 3 == 0 else () for i in range(n)]
    zero = {g: 0.0 for g in GROUPS}
    params = cal.Params(LEX, zero, {"rule": 0.2, "project": 0.25}, zero, None)
    t = cal.thresholds(s, params, False, cal.probabilities(s, None))
    got = cal.shape_counts(s, t, params.floors)
    assert got["all"].cases == s.n_relevant and got["all"].irrelevant == n - s.n_relevant
    assert got["short"].cases == len([i for i in range(s.n_relevant) if i % 3 == 0])
    # Leaks per group equal the group counts; a floor no case reaches leaves nothing.
    for g in GROUPS:
        assert got["all"].leaks[g] == cal.counts(t, g, params.floors[g]).leaks
    none = cal.shape_counts(s, t, {"rule": 99.0, "project": 99.0})
    assert none["all"].hits == 0 and none["all"].leaks == {"rule": 0, "project": 0}
    folds = cal.loso([s, synthetic_set("b", 2), synthetic_set("c", 3)], LEX)
    assert folds[0].shapes_plain["short"].cases == got["short"].cases
    assert "short" not in folds[1].shapes_plain  # sets without shapes count under "all" only
    pooled = cal.pooled_shapes([f.shapes_plain for f in folds])
    assert pooled["all"].cases == sum(f.shapes_plain["all"].cases for f in folds)


def test_held_out_figures_are_read_and_checked(tmp_path: Path) -> None:
    shipped = load_calibration(OFFLINE_MODEL)
    assert shipped is not None and {"with", "without"} <= shipped.held_out.keys()
    raw = json.loads((calibration_dir() / file_name(OFFLINE_MODEL)).read_text(encoding="utf-8"))
    for bad in ({"with": {"ruleHit": 2.0}}, {"with": "many"}, []):
        raw["held_out"] = bad
        (tmp_path / file_name(OFFLINE_MODEL)).write_text(json.dumps(raw), encoding="utf-8")
        with pytest.raises(CorruptFile, match="held_out"):
            load_calibration(OFFLINE_MODEL, tmp_path)


# ------------------------------------------------------------------------ the detector's words


def test_a_prompts_grams_are_its_words_and_chinese_characters_and_pairs() -> None:
    from memself.recall.wording import QUESTION_MARK, grams

    assert grams("数据库用的啥") >= {"c:数", "c:数据", "c:用的", "c:的啥", "c:啥"}
    assert "c:数据库" not in grams("数据库用的啥")  # pairs, not triples
    assert grams("What's Redis for here?") == {"w:what", "w:s", "w:redis", "w:for", "w:here", QUESTION_MARK}
    assert grams("k8s ns？") == {"w:k8s", "w:ns", QUESTION_MARK}
    assert grams("") == frozenset()


def test_the_vocabulary_keeps_only_grams_that_several_sets_share() -> None:
    from memself.recall.wording import vocabulary

    sets = [["数据库用的啥", "redis 是什么"], ["日志在哪", "TCP 是什么"], ["pg 用的啥"]]
    got = vocabulary(sets, 2)
    assert {"c:是什", "c:什么", "c:用的", "c:的啥"} <= set(got)
    assert "w:redis" not in got and "c:日志" not in got  # one set's topics are not kept
    assert list(got) == sorted(got)
    assert vocabulary(sets, 4) == ()


def test_word_features_are_a_scaled_unit_vector_of_the_grams_present() -> None:
    from memself.recall.wording import word_features, word_index

    x = word_features(["用的啥", "nothing known", ""], word_index(["c:啥", "c:用的", "w:vs"]), 0.6)
    assert x[0] == pytest.approx([0.6 / 2**0.5, 0.6 / 2**0.5, 0.0])
    assert not x[1].any() and not x[2].any()


def test_the_detector_reads_the_words_it_was_trained_on() -> None:
    from memself.recall.calibration import GeneralQuestion
    from memself.recall.scoring import general_probability

    # Two synthetic sets whose prompts differ only in their wording: the vectors are noise, the
    # relevant prompts say "用的啥", the unrelated ones "是什么".
    sets = []
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        s = synthetic_set(name, seed)
        rng = np.random.default_rng(seed)
        for block in (s.pool, s.single_rel, s.single_irr):
            block.vectors = rng.normal(size=block.vectors.shape)
        n = len(s.pool)
        ask = ["用的啥" if i < s.n_relevant else "是什么" for i in range(n)]
        s.pool.texts = tuple(f"{name}{i} {a}" for i, a in enumerate(ask))
        s.single_rel.texts = tuple("它用的啥" for _ in range(len(s.single_rel)))
        s.single_irr.texts = tuple("它是什么" for _ in range(len(s.single_irr)))
        sets.append(s)
    plain = cal.train_classifier(sets[:2])
    worded = cal.train_classifier(sets[:2], wording=cal.Wording(0.6, 2))
    assert plain.words == () and "c:用的" in worded.words and "w:a0" not in worded.words
    held = sets[2]
    gap = lambda p: p[held.n_relevant :].mean() - p[: held.n_relevant].mean()  # noqa: E731
    assert gap(worded.probability(held.pool)) > 0.3 > gap(plain.probability(held.pool)) + 0.2
    # The runtime reads the same words the same way.
    general = GeneralQuestion(
        tuple(worded.weights), worded.bias, {"rule": 1.0, "project": 1.0}, worded.words, 0.6
    )
    runtime = general_probability(general, held.pool.vectors, held.pool.texts)
    assert runtime == pytest.approx(worded.probability(held.pool))


def test_a_files_words_are_checked(tmp_path: Path) -> None:
    raw = json.loads((calibration_dir() / file_name(OFFLINE_MODEL)).read_text(encoding="utf-8"))
    cases = (
        ("c:啥", 0.6),
        ([1, 2], 0.6),
        ([""], 0.6),
        (["c:啥"], -1.0),
        (["c:啥"], 0.0),
        (["c:啥"] * 5000, 0.6),
    )
    for words, scale in cases:
        raw["general_question"]["words"], raw["scoring"]["general_words"] = words, scale
        (tmp_path / file_name(OFFLINE_MODEL)).write_text(json.dumps(raw), encoding="utf-8")
        with pytest.raises(CorruptFile, match="general_question"):
            load_calibration(OFFLINE_MODEL, tmp_path)
