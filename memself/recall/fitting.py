"""Calibrating a model's recall on labelled case sets, and measuring it on sets left out.

Each case set is scored once (``SetScores``: every signal of every prompt apart, from
``Recaller.parts``), so the calibration tries classifiers, penalties and floors without the model.
``calibrate``, on a list of sets, is the procedure the shipped numbers come from:

1. The general-question classifier is cross-fitted: each set's prompts are scored by a classifier
   trained on the other sets only, so penalty and floors are chosen on scores as an unseen set
   would get them. (With a single set there is nothing to hold out: it is scored in-sample.)
2. The penalty pair (project, rule): every pair of ``PENALTY_STEPS`` is tried, floors as in 3; the
   pair with the highest pooled hit rates (rule + project + single-memory) wins, the first on a tie.
3. The floor of each group, on the sets pooled, memories without views: the most relevant and
   single-memory hits with at most the group's leak limit of unrelated prompts leaking; then the
   fewest leaks; then the middle of the floors that give that.
4. The view offset of each group: the floor found the same way with every memory's appliesWhen
   views, at the stricter leak limits set for memories that carry requests (``VIEW_LEAK_LIMIT``),
   minus the floor of 3 (0 when no set has views).
5. The classifier trained on all the sets: the one that ships.

``loso`` calibrates on all sets but one and counts on the one left out, for each set in turn.

How counting works without re-running the gate (exact for the gate with the margin off): for one
prompt and one group with the top k scores ranked, a memory is recalled iff it is in the top k,
scores at least 0.6 x top1, and its score minus its extra floor (the view offset) reaches the
floor. So each case reduces to one number, the best such ``score - extra`` (of an expected memory
for a relevant case, of any memory for an unrelated one), and it counts at floor f iff that
number >= f.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memself.recall.gate import RELATIVE
from memself.recall.scoring import ScoringSettings, extra_floors, fuse
from memself.store.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

# Recall's leak limits per group: the share of unrelated prompts allowed to bring a memory.
LEAK_LIMIT = {"project": 0.05, "rule": 0.20}
# The same for memories scored with their appliesWhen requests: the requests buy hits, so the
# targets ask them to leak less, and the view offsets are fitted at these limits.
VIEW_LEAK_LIMIT = {"project": 0.03, "rule": 0.15}
# Penalties tried for each group (rule and project independently).
PENALTY_STEPS = (0.0, 0.2, 0.4, 0.7, 1.0)
# Ridge strength of the general-question classifier (on unit vectors).
L2 = 0.1
# Floors tried: a negative floor means "off" to the gate, so none is negative.
FLOOR_STEP = 0.0005
FLOOR_MAX = 1.5
NEVER = -1e9  # a case no floor can make count


@dataclass
class Block:
    """Prompts x memories of one pool: each signal apart (``memself.recall.scoring.ScoreParts``
    stacked), and the prompts' raw vectors. ``entity``: the share of the general-question penalty
    each memory is spared (``ScoreParts.entity``; None: nothing spared)."""

    dense_text: np.ndarray
    dense: np.ndarray
    lexical_text: np.ndarray
    lexical: np.ndarray
    vectors: np.ndarray
    entity: np.ndarray | None = None
    texts: tuple[str, ...] = ()  # the prompts, whose words the detector may read

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


@dataclass
class SetScores:
    """One case set, scored once.

    ``pool``: the relevant prompts (first ``n_relevant`` rows), then the unrelated ones, against
    the set's memories (``group`` codes, ``has_views``); ``expect[i]``: positions of the memories
    relevant case i needs. ``single_rel`` / ``single_irr``: each single-memory case's prompts
    against its one memory (one column), ``*_owner`` the case of each row. ``shapes``: per prompt
    of ``pool``, the shapes it is counted under (``memself.recall.shape``: ``short``,
    ``english``, and the case's own tags); empty when unknown.
    """

    name: str
    group: np.ndarray
    has_views: np.ndarray
    pool: Block
    n_relevant: int
    expect: list[np.ndarray]
    single_group: np.ndarray
    single_views: np.ndarray
    single_rel: Block
    single_rel_owner: np.ndarray
    single_irr: Block
    single_irr_owner: np.ndarray
    shapes: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def any_views(self) -> bool:
        return bool(self.has_views.any() or self.single_views.any())


@dataclass
class Thresholds:
    """Per group: the number each case reduces to (see the module doc)."""

    rel: dict[str, np.ndarray]
    irr: dict[str, np.ndarray]
    single: dict[str, np.ndarray]


@dataclass(frozen=True)
class Counts:
    hits: int
    cases: int
    leaks: int
    irrelevant: int
    single_hits: int
    single_cases: int


@dataclass(frozen=True)
class ShapeCounts:
    """One shape of prompt: relevant prompts that recalled at least one memory they need (any
    group), and unrelated prompts that recalled something, per group."""

    hits: int
    cases: int
    leaks: dict[str, int]
    irrelevant: int

    def __add__(self, other: ShapeCounts) -> ShapeCounts:
        return ShapeCounts(
            self.hits + other.hits,
            self.cases + other.cases,
            {g: self.leaks.get(g, 0) + other.leaks.get(g, 0) for g in GROUPS},
            self.irrelevant + other.irrelevant,
        )


@dataclass(frozen=True)
class Wording:
    """Whether the detector reads the prompt's words (``memself.recall.wording``): ``scale`` 0 =
    not; else the vocabulary is the grams found in at least ``min_sets`` of the sets it is
    trained on."""

    scale: float = 0.0
    min_sets: int = 3


def wording_of(scoring: ScoringSettings) -> Wording:
    """The detector's words as a model's scoring knobs set them."""
    return Wording(scoring.general_words, scoring.general_words_sets)


@dataclass(frozen=True)
class Classifier:
    weights: np.ndarray  # (dim + len(words),)
    bias: float
    words: tuple[str, ...] = ()
    word_scale: float = 0.0

    def probability(self, block: Block) -> np.ndarray:
        import numpy as np

        z = _features(block, self.words, self.word_scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))


def _features(block: Block, words: Sequence[str], scale: float) -> np.ndarray:
    """What the detector reads of a block's prompts: their vectors, then their words."""
    import numpy as np

    x = np.asarray(block.vectors, dtype=np.float64)
    if not words:
        return x
    from memself.recall.wording import word_features, word_index

    return np.hstack([x, word_features(block.texts, word_index(words), scale)])


@dataclass
class Calibration:
    """What ``calibrate`` found (``view_offset`` is 0 when no set had views)."""

    penalty: dict[str, float]
    floors: dict[str, float]
    view_offset: dict[str, float]
    classifier: Classifier | None
    views_floors: dict[str, float] | None = None
    sets: list[str] = field(default_factory=list)


@dataclass
class Params:
    """Everything the counting needs besides the scores."""

    lexical: dict[str, float]
    penalty: dict[str, float]
    floors: dict[str, float]
    view_offset: dict[str, float]
    classifier: Classifier | None
    top_k: int = 3


# ------------------------------------------------------------------------------------ counting


def thresholds(
    s: SetScores, params: Params, views: bool, probabilities: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> Thresholds:
    """Each case of ``s`` reduced to one number at these params (views on or off); the
    general-question probabilities of the pool, single relevant and single unrelated prompts are
    given (cross-fitting decides which classifier made them)."""
    import numpy as np

    p_pool, p_srel, _ = probabilities
    block = s.pool
    dense = block.dense if views else block.dense_text
    lexical = block.lexical if views else block.lexical_text
    fused = fuse(
        dense, lexical, s.group[None, :], p_pool[:, None], params.lexical, params.penalty, block.entity
    )
    extra = extra_floors(s.group, s.has_views & views, params.view_offset)
    out = Thresholds({}, {}, {})
    for code, g in enumerate(GROUPS):
        cols = np.flatnonzero(s.group == code)
        k = min(params.top_k, len(cols))
        if k == 0:
            out.rel[g] = np.zeros(0)
            out.irr[g] = np.full(len(block) - s.n_relevant, NEVER)
            continue
        sub = fused[:, cols]
        # Ties ranked by position, as the gate's ranking does.
        order = np.argsort(-sub, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(sub, order, axis=1).astype(np.float64)
        ok = top >= RELATIVE * top[:, :1]
        value = np.where(ok, top - extra[cols][order], NEVER)
        rel = []
        for i, want in enumerate(s.expect):
            mine = np.isin(cols[order[i]], want[s.group[want] == code])
            if (s.group[want] == code).any():
                rel.append(value[i][mine].max() if mine.any() else NEVER)
        out.rel[g] = np.asarray(rel, dtype=np.float64)
        out.irr[g] = value[s.n_relevant :].max(axis=1)
    # A single-memory case's unrelated prompts train the classifier; the floors never look at
    # them (verify reports them).
    single = _single(s.single_rel, s.single_rel_owner, s, params, views, p_srel)
    for code, g in enumerate(GROUPS):
        out.single[g] = single[s.single_group[s.single_rel_owner] == code]
    return out


def _single(
    block: Block, owner: np.ndarray, s: SetScores, params: Params, views: bool, p: np.ndarray
) -> np.ndarray:
    import numpy as np

    if not len(block):
        return np.zeros(0)
    group = s.single_group[owner]
    dense = (block.dense if views else block.dense_text)[:, 0]
    lexical = (block.lexical if views else block.lexical_text)[:, 0]
    spared = block.entity[:, 0] if block.entity is not None else None
    fused = fuse(dense, lexical, group, p, params.lexical, params.penalty, spared)
    extra = extra_floors(group, s.single_views[owner] & views, params.view_offset)
    return fused.astype(np.float64) - extra


def counts(t: Thresholds, group: str, floor: float) -> Counts:
    return Counts(
        int((t.rel[group] >= floor).sum()),
        len(t.rel[group]),
        int((t.irr[group] >= floor).sum()),
        len(t.irr[group]),
        int((t.single[group] >= floor).sum()),
        len(t.single[group]),
    )


def shape_counts(s: SetScores, t: Thresholds, floors: dict[str, float]) -> dict[str, ShapeCounts]:
    """Per shape (``SetScores.shapes``; ``all`` for every prompt): see ``ShapeCounts``."""
    import numpy as np

    n = s.n_relevant
    hit = np.zeros(n, dtype=bool)
    for code, g in enumerate(GROUPS):
        rows = [i for i, want in enumerate(s.expect) if (s.group[want] == code).any()]
        if rows:
            hit[rows] |= t.rel[g] >= floors[g]
    leak = {g: t.irr[g] >= floors[g] for g in GROUPS}
    shapes = s.shapes if len(s.shapes) == len(s.pool) else [()] * len(s.pool)
    out: dict[str, ShapeCounts] = {}
    for i, names in enumerate(shapes):
        relevant = i < n
        one = ShapeCounts(
            int(relevant and hit[i]),
            int(relevant),
            {g: 0 if relevant else int(leak[g][i - n]) for g in GROUPS},
            int(not relevant),
        )
        for name in ("all", *names):
            out[name] = out[name] + one if name in out else one
    return out


def floor_grid() -> np.ndarray:
    import numpy as np

    return np.round(np.arange(0.0, FLOOR_MAX, FLOOR_STEP), 4)


def best_floor(ts: Sequence[Thresholds], group: str, limit: float) -> float:
    """Step 3 of the module doc, on the sets pooled."""
    import numpy as np

    grid = floor_grid()
    rel = np.concatenate([t.rel[group] for t in ts])
    irr = np.concatenate([t.irr[group] for t in ts])
    single = np.concatenate([t.single[group] for t in ts])
    hits = (rel[None, :] >= grid[:, None]).sum(1) + (single[None, :] >= grid[:, None]).sum(1)
    leaks = (irr[None, :] >= grid[:, None]).sum(1)
    ok = leaks <= limit * len(irr) + 1e-9
    if not ok.any():
        return float(grid[-1])
    top = hits[ok].max()
    least = leaks[ok & (hits == top)].min()
    chosen = grid[ok & (hits == top) & (leaks == least)]
    return float((chosen.min() + chosen.max()) / 2)


def objective(ts: Sequence[Thresholds], floors: dict[str, float]) -> float:
    """Pooled hit rates at ``floors``: relevant rule + relevant project + single-memory."""
    total = 0.0
    single_hits = single_cases = 0
    for g in GROUPS:
        c = [counts(t, g, floors[g]) for t in ts]
        cases = sum(x.cases for x in c)
        total += sum(x.hits for x in c) / cases if cases else 0.0
        single_hits += sum(x.single_hits for x in c)
        single_cases += sum(x.single_cases for x in c)
    return total + (single_hits / single_cases if single_cases else 0.0)


# ---------------------------------------------------------------------------------- classifier


def labelled(s: SetScores) -> tuple[list[Block], np.ndarray]:
    """The set's prompts (its blocks) and whether each needs no memory (1) or one (0)."""
    import numpy as np

    y = np.concatenate(
        [
            np.zeros(s.n_relevant),
            np.ones(len(s.pool) - s.n_relevant),
            np.zeros(len(s.single_rel)),
            np.ones(len(s.single_irr)),
        ]
    )
    return [s.pool, s.single_rel, s.single_irr], y


def train_classifier(sets: Sequence[SetScores], l2: float = L2, wording: Wording = Wording()) -> Classifier:
    """Ridge logistic regression (bias not penalised) by Newton steps, each solved by conjugate
    gradients: with the words the detector has more weights than prompts to learn them from, and
    a dense solve would cost seconds per training."""
    import numpy as np

    from memself.recall.wording import vocabulary

    parts = [labelled(s) for s in sets]
    words: tuple[str, ...] = ()
    if wording.scale > 0:
        words = vocabulary(([t for b in blocks for t in b.texts] for blocks, _ in parts), wording.min_sets)
    x = np.vstack([_features(b, words, wording.scale) for blocks, _ in parts for b in blocks])
    x = np.hstack([x, np.ones((len(x), 1))])
    y = np.concatenate([p[1] for p in parts])
    reg = np.full(x.shape[1], l2)
    reg[-1] = 0.0
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + reg * w
        step = _newton_step(x, p * (1 - p), reg, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return Classifier(w[:-1], float(w[-1]), words, wording.scale)


def _newton_step(x: np.ndarray, curvature: np.ndarray, reg: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Solve (x' diag(curvature) x + diag(reg)) step = grad by preconditioned conjugate gradients."""
    import numpy as np

    diag = (x * x).T @ curvature + reg + 1e-12
    step = np.zeros_like(grad)
    r = grad.copy()
    z = r / diag
    d = z.copy()
    rz = float(r @ z)
    limit = 1e-20 * max(float(grad @ grad), 1e-300)
    for _ in range(4 * len(grad)):
        hd = x.T @ (curvature * (x @ d)) + reg * d
        alpha = rz / float(d @ hd)
        step += alpha * d
        r -= alpha * hd
        if float(r @ r) <= limit:
            break
        z = r / diag
        rz_next = float(r @ z)
        d = z + (rz_next / rz) * d
        rz = rz_next
    return step


def probabilities(s: SetScores, clf: Classifier | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import numpy as np

    if clf is None:
        return np.zeros(len(s.pool)), np.zeros(len(s.single_rel)), np.zeros(len(s.single_irr))
    return clf.probability(s.pool), clf.probability(s.single_rel), clf.probability(s.single_irr)


# --------------------------------------------------------------------------------- calibration


def penalty_grid() -> list[dict[str, float]]:
    return [{"project": p, "rule": r} for p in PENALTY_STEPS for r in PENALTY_STEPS]


def calibrate(
    sets: Sequence[SetScores],
    lexical: dict[str, float],
    general: bool = True,
    limits: dict[str, float] = LEAK_LIMIT,
    top_k: int = 3,
    view_limits: dict[str, float] = VIEW_LEAK_LIMIT,
    wording: Wording = Wording(),
) -> Calibration:
    """The procedure of the module doc on ``sets`` (``general`` False: no classifier, no penalty;
    ``wording``: whether the classifier reads the prompts' words)."""
    zero = {g: 0.0 for g in GROUPS}
    if general:
        if len(sets) > 1:
            crossed = {
                s.name: train_classifier([o for o in sets if o is not s], wording=wording) for s in sets
            }
        else:
            crossed = {s.name: train_classifier(sets, wording=wording) for s in sets}
        probs = {s.name: probabilities(s, crossed[s.name]) for s in sets}
        candidates = penalty_grid()
    else:
        probs = {s.name: probabilities(s, None) for s in sets}
        candidates = [dict(zero)]
    best: tuple[float, dict[str, float], dict[str, float]] | None = None
    for penalty in candidates:
        params = Params(lexical, penalty, zero, zero, None, top_k)
        ts = [thresholds(s, params, False, probs[s.name]) for s in sets]
        floors = {g: best_floor(ts, g, limits[g]) for g in GROUPS}
        score = objective(ts, floors)
        if best is None or score > best[0]:
            best = (score, penalty, floors)
    assert best is not None
    _, penalty, floors = best
    offset, views_floors = dict(zero), None
    with_views = [s for s in sets if s.any_views]
    if with_views:
        params = Params(lexical, penalty, zero, zero, None, top_k)
        ts = [thresholds(s, params, True, probs[s.name]) for s in with_views]
        views_floors = {g: best_floor(ts, g, view_limits[g]) for g in GROUPS}
        offset = {g: views_floors[g] - floors[g] for g in GROUPS}
    classifier = train_classifier(sets, wording=wording) if general else None
    return Calibration(penalty, floors, offset, classifier, views_floors, [s.name for s in sets])


def params_of(cal: Calibration, lexical: dict[str, float], top_k: int = 3) -> Params:
    return Params(lexical, cal.penalty, cal.floors, cal.view_offset, cal.classifier, top_k)


def count_set(s: SetScores, params: Params, views: bool) -> dict[str, Counts]:
    """Counts of one set at ``params`` (its classifier applied to the set's prompts)."""
    return count_shapes(s, params, views)[0]


def count_shapes(
    s: SetScores, params: Params, views: bool
) -> tuple[dict[str, Counts], dict[str, ShapeCounts]]:
    """``count_set`` and the counts per shape of prompt (``shape_counts``)."""
    t = thresholds(s, params, views, probabilities(s, params.classifier))
    return {g: counts(t, g, params.floors[g]) for g in GROUPS}, shape_counts(s, t, params.floors)


@dataclass
class Fold:
    held: str
    calibration: Calibration
    plain: dict[str, Counts]
    views: dict[str, Counts] | None
    shapes_plain: dict[str, ShapeCounts] = field(default_factory=dict)
    shapes_views: dict[str, ShapeCounts] | None = None


def loso(
    sets: Sequence[SetScores],
    lexical: dict[str, float],
    general: bool = True,
    top_k: int = 3,
    limits: dict[str, float] = LEAK_LIMIT,
    view_limits: dict[str, float] = VIEW_LEAK_LIMIT,
    wording: Wording = Wording(),
) -> list[Fold]:
    """For each set: calibrate on the others, count on it (without views, and with them when it
    has any)."""
    folds = []
    for held in sets:
        others = [s for s in sets if s is not held]
        cal = calibrate(others, lexical, general, limits, top_k, view_limits, wording)
        params = params_of(cal, lexical, top_k)
        plain, plain_shapes = count_shapes(held, params, False)
        views, views_shapes = count_shapes(held, params, True) if held.any_views else (None, None)
        folds.append(Fold(held.name, cal, plain, views, plain_shapes, views_shapes))
    return folds


def pooled_shapes(per_set: Sequence[dict[str, ShapeCounts]]) -> dict[str, ShapeCounts]:
    """Shape counts summed over sets (a shape has too few prompts in one set for a mean of rates)."""
    out: dict[str, ShapeCounts] = {}
    for counts_ in per_set:
        for name, c in counts_.items():
            out[name] = out[name] + c if name in out else c
    return out


def rates(per_set: Sequence[dict[str, Counts]]) -> dict[str, float]:
    """Mean over sets of each rate: rule hit / leak, project hit / leak, single-memory hit."""
    out = {"ruleHit": 0.0, "ruleLeak": 0.0, "projectHit": 0.0, "projectLeak": 0.0, "single": 0.0}
    if not per_set:
        return out
    for c in per_set:
        r, p = c["rule"], c["project"]
        out["ruleHit"] += r.hits / r.cases if r.cases else 0.0
        out["ruleLeak"] += r.leaks / r.irrelevant if r.irrelevant else 0.0
        out["projectHit"] += p.hits / p.cases if p.cases else 0.0
        out["projectLeak"] += p.leaks / p.irrelevant if p.irrelevant else 0.0
        singles = r.single_cases + p.single_cases
        out["single"] += (r.single_hits + p.single_hits) / singles if singles else 0.0
    return {k: v / len(per_set) for k, v in out.items()}
