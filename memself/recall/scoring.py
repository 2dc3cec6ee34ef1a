"""Scoring: how close each memory is to a prompt, and the per-group recall built on it.

For one prompt and the memories of a pool (``Recaller``):

1. Dense: the prompt (and, for a prompt of several sentences, each sentence: a memory's score is
   the best over them, as the original took the max over several query texts) and every memory
   vector are moved into the model's *recall space* (``memself.recall.background``: minus the
   background mean, minus its top principal directions, re-normalised); the score is the cosine
   there. Without principal directions this is exactly the original's centred cosine.
2. Views: a memory with appliesWhen requests is scored against its text and each request, and
   keeps the best (dense and lexical alike); the best of several texts runs higher than one text,
   so such a memory must reach its group's floor plus the model's ``view_offset`` for that group
   (``extra_floors``; the gate's ranking and relative line use the scores as they are). A memory
   without requests scores, and is gated, as before.
3. Lexical (``memself.recall.lexical``): shared identifiers and Chinese words weighted by rarity, added
   with a per-group weight. Rules gain much (a prompt that names the thing a rule governs); project
   facts gain a little (a general question about a public technology names it exactly like the fact
   does), and only the facts with the best dense scores are scored (``LEXICAL_SHORTLIST``).
4. General question: a classifier on the prompt's raw vector says how likely the prompt needs no
   memory at all ("X 和 Y 有什么区别"); each group's scores drop by its penalty times that. A
   short lookup that names an identifier a memory names ("mongo 连接串") waives part of the
   penalty for that memory (``memself.recall.entities``, ``entity_relief``).
5. The gate (``memself.recall.gate``), per group, over the active memories.

Every number is per model, from its calibration file (``memself.recall.calibration``), calibrated
with ``memself.recall.fitting``; a model without one gets the original's plain centred cosine.
``fuse`` is the one formula that adds the signals up: recall, ``memself verify`` and the
calibration all use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memself.recall.background import load_space
from memself.recall.gate import GateOutcome, GateParams, gate_explained
from memself.recall.pool import RecallPool, group_table
from memself.recall.result import GroupRecall, Hit, RecallResult
from memself.store.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

    from memself.model.catalog import ModelSettings
    from memself.model.encoder import Encoder
    from memself.recall.background import RecallSpace
    from memself.recall.calibration import GeneralQuestion, RecallCalibration
    from memself.store.records import Memory

# Groups whose lexical overlap is scored on a shortlist, the memories with the best dense scores
# that the workspace sees, instead of on postings over the whole group. Project facts are the bulk
# of a large store, so postings over them would cost seconds at start and hundreds of MB; and
# their small weight can only reorder facts that already score near the top. Rules stay whole:
# they are few, and their weight lets a shared word lift a rule from far down.
LEXICAL_SHORTLIST = {"project": 64}
_MAX_EXTRA_VIEWS = 4
_SENTENCE_SPLIT = re.compile(r"[。！？；;!?\n]+")
_MIN_VIEW_CHARS = 4


def _zero_groups() -> dict[str, float]:
    return {g: 0.0 for g in GROUPS}


@dataclass(frozen=True)
class ScoringSettings:
    """How one model scores (not the gate: floors, margin and top-k come from config).

    Read from the model's calibration file (``scoring``, float values by name):
    ``space_dims`` principal directions removed (0: plain centring);
    ``general_space`` 1 = the space is built from the shipped general prompts, 0 = from
    ``background_sentences.json``; ``lexical_rule`` / ``lexical_project`` fusion weights;
    ``lexical_tau`` saturation of the lexical overlap; ``sentence_views`` 1 = also score each
    sentence of a multi-sentence prompt; ``symmetric`` 1 = memories are encoded like prompts
    (e5's ``query: `` on both sides, its advice for text-to-text similarity; see
    ``memself.recall.memory_side``); ``applies_when`` 1 = a memory's appliesWhen requests are
    scored as views of it, ``applies_when_lexical`` 1 = the lexical signal too;
    ``general_question`` 1 = the general-question detector is used (``general``: its weights and
    penalties, once calibrated), ``general_shape`` 1 = it also reads the prompt's length
    (``memself.recall.shape.detector_features``), ``general_words`` > 0 = it also reads the
    prompt's words (``memself.recall.wording``, at that scale; the vocabulary is the grams found
    in at least ``general_words_sets`` calibration sets, and ships in ``general``);
    ``entity_relief`` the share of the penalty a memory is spared when a short lookup prompt
    names one of its identifiers (``memself.recall.entities``). Besides: ``view_offset`` per group.
    """

    space_dims: int = 0
    general_space: bool = False
    lexical: dict[str, float] = field(default_factory=_zero_groups)
    lexical_tau: float = 20.0
    sentence_views: bool = False
    symmetric: bool = False
    applies_when: bool = False
    applies_when_lexical: bool = False
    general_question: bool = False
    general_shape: bool = False
    general_words: float = 0.0
    general_words_sets: int = 3
    entity_relief: float = 0.0
    view_offset: dict[str, float] = field(default_factory=_zero_groups)
    general: GeneralQuestion | None = None

    @classmethod
    def from_calibration(cls, calibration: RecallCalibration | None) -> ScoringSettings:
        if calibration is None:
            return cls()
        cal = calibration.scoring
        return cls(
            space_dims=max(int(cal.get("space_dims", 0)), 0),
            general_space=bool(cal.get("general_space", 0.0)),
            lexical={
                "rule": float(cal.get("lexical_rule", 0.0)),
                "project": float(cal.get("lexical_project", 0.0)),
            },
            lexical_tau=float(cal.get("lexical_tau", 20.0)) or 20.0,
            sentence_views=bool(cal.get("sentence_views", 0.0)),
            symmetric=bool(cal.get("symmetric", 0.0)),
            applies_when=bool(cal.get("applies_when", 0.0)),
            applies_when_lexical=bool(cal.get("applies_when_lexical", 0.0)),
            general_question=bool(cal.get("general_question", 0.0)),
            general_shape=bool(cal.get("general_shape", 0.0)),
            general_words=max(float(cal.get("general_words", 0.0)), 0.0),
            general_words_sets=max(int(cal.get("general_words_sets", 3)), 1),
            entity_relief=min(max(float(cal.get("entity_relief", 0.0)), 0.0), 1.0),
            view_offset=dict(calibration.view_offset),
            general=calibration.general if cal.get("general_question", 0.0) else None,
        )

    @classmethod
    def from_model(cls, settings: ModelSettings) -> ScoringSettings:
        return cls.for_model_id(settings.model_id)

    @classmethod
    def for_model_id(cls, model_id: str) -> ScoringSettings:
        """Settings of exactly this model id; a model without a calibration file gets the plain
        defaults."""
        from memself.recall.calibration import load_calibration

        return cls.from_calibration(load_calibration(model_id))

    @property
    def uses_lexical(self) -> bool:
        return any(w != 0.0 for w in self.lexical.values())


@dataclass(frozen=True)
class ScoreParts:
    """One prompt against a pool, every signal apart (arrays in pool order).

    ``dense_text`` / ``lexical_text``: against the memory text alone; ``dense`` / ``lexical``:
    the best over the text and its appliesWhen views (equal to the text's for a memory without);
    ``general``: P(the prompt needs no memory), 0 without a detector; ``vector``: what the detector
    reads (the prompt's raw vector, then its length features when the model's detector uses them);
    ``entity``: per memory, the share of the general-question penalty it is spared (a short lookup
    naming one of its identifiers: ``entity_relief``, else 0).
    """

    dense_text: np.ndarray
    dense: np.ndarray
    lexical_text: np.ndarray
    lexical: np.ndarray
    general: float
    vector: np.ndarray
    best_view: np.ndarray  # per memory: 0 = its text scored best, k = its k-th view
    entity: np.ndarray


def per_group(values: dict[str, float]) -> np.ndarray:
    """A lookup by group code (``RecallPool.group``; -1, an unknown group, reads 0)."""
    return group_table(values)


def fuse(
    dense: np.ndarray,
    lexical: np.ndarray,
    group: np.ndarray,
    general: np.ndarray | float,
    lexical_weight: dict[str, float],
    penalty: dict[str, float],
    spared: np.ndarray | None = None,
    by_group: Callable[[dict[str, float]], np.ndarray] | None = None,
) -> np.ndarray:
    """The fused score: ``dense + w[group] x lexical - penalty[group] x general x (1 - spared)``.
    Arrays are memories (one prompt) or prompts x memories (``general`` then a column);
    ``spared`` (like ``dense``; None: 0) is the share of the penalty each memory is spared
    (``ScoreParts.entity``). ``by_group`` (None: looked up in ``group``) gives ``values[group]``
    for a dict of per-group values, e.g. a pool's kept lookups (``RecallPool.by_group``)."""
    import numpy as np

    def lookup(values: dict[str, float]) -> np.ndarray:
        return per_group(values)[group] if by_group is None else by_group(values)

    out = dense + lookup(lexical_weight) * lexical
    if np.any(general):
        cost = lookup(penalty) * general
        out = out - (cost if spared is None else cost * (1.0 - spared))
    return out.astype(np.float32, copy=False)


def extra_floors(group: np.ndarray, has_views: np.ndarray, view_offset: dict[str, float]) -> np.ndarray:
    """How far above its group's floor each memory must score: the view offset for a memory
    scored with views, 0 for the others."""
    import numpy as np

    return np.where(has_views, per_group(view_offset)[group], np.float32(0.0)).astype(np.float32)


def general_probability(general: GeneralQuestion, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """P(needs no memory) per row of ``vectors`` (the prompts' ``ScoreParts.vector``) and of
    ``texts`` (the same prompts' text, whose words the detector also reads)."""
    import numpy as np

    w = general.weight_vector
    width = vectors.shape[-1] + len(general.words)
    if w.shape[0] != width:
        from memself.errors import CorruptFile

        raise CorruptFile(f"通用问题检测的权重有 {w.shape[0]} 维，模型向量和词表合起来是 {width} 维")
    z = np.asarray(vectors, dtype=np.float64) @ w[: vectors.shape[-1]] + general.bias
    if general.words:
        from memself.recall.wording import word_features

        z += word_features(texts, general.word_index, general.word_scale) @ w[vectors.shape[-1] :]
    return 1.0 / (1.0 + np.exp(-z))


def query_views(text: str, sentence_views: bool) -> list[str]:
    """The prompt itself, then (when enabled and there are several) its sentences."""
    views = [text]
    if sentence_views:
        parts = [p.strip() for p in _SENTENCE_SPLIT.split(text)]
        parts = [p for p in parts if len(p) >= _MIN_VIEW_CHARS and p != text.strip()]
        if len(parts) > 1:
            views.extend(parts[:_MAX_EXTRA_VIEWS])
    return views


class Recaller:
    """Scores prompts against memory vectors in one model's recall space.

    ``matrix`` is the raw (not centred) vector matrix, e.g. ``VectorIndex.matrix``. Per-row norms
    in the space are cached under ``matrix_key`` (e.g. the index generation; None = no caching),
    so with a key one prompt costs one matrix-vector product per view.
    """

    def __init__(self, encoder: Encoder, space: RecallSpace, scoring: ScoringSettings) -> None:
        self.encoder = encoder
        self.space = space
        self.scoring = scoring
        self._norms_key: object = None
        self._norms: np.ndarray | None = None
        self._pool_key: tuple[object, ...] | None = None
        self._pool: RecallPool | None = None
        self._tokens: dict[str, dict[str, float]] = {}
        self._names: dict[str, frozenset[str]] = {}

    def _as_pool(self, memories: RecallPool | Sequence[Memory], rows: Sequence[int] | None) -> RecallPool:
        """A list becomes a pool, reused while the same memory objects and rows come back (the
        engine passes its list per prompt; rebuilding would re-read every memory and rebuild the
        lexical postings). The key holds object ids; the cached pool keeps those objects alive,
        so an id cannot be reused by a different object while it is cached."""
        if isinstance(memories, RecallPool):
            return memories
        key = (tuple(map(id, memories)), None if rows is None else tuple(rows))
        if self._pool is None or self._pool_key != key:
            self._pool, self._pool_key = RecallPool(memories, rows), key
        return self._pool

    # -- pieces

    def _row_norms(self, matrix: np.ndarray, key: object) -> np.ndarray:
        """``|P(p - mean)|`` per row, without building the projected matrix."""
        import numpy as np

        # Cached only under a caller's key (e.g. the index generation): an id() of a freed array
        # can come back for a different array, so identity alone is not safe.
        cache_key = None if key is None else (key, matrix.shape)
        if cache_key is None or self._norms is None or self._norms_key != cache_key:
            mu = self.space.mean
            sq = np.einsum("ij,ij->i", matrix, matrix) - 2.0 * (matrix @ mu) + float(mu @ mu)
            if len(self.space.components):
                along = matrix @ self.space.components.T - self.space.components @ mu
                sq = sq - np.einsum("ij,ij->i", along, along)
            norms = np.sqrt(np.maximum(sq, 1e-12)).astype(np.float32)
            if cache_key is None:
                return norms
            self._norms, self._norms_key = norms, cache_key
        return self._norms

    def _row_scores(self, text: str, matrix: np.ndarray, matrix_key: object) -> tuple[np.ndarray, np.ndarray]:
        """Best cosine over the prompt's views with every row of ``matrix`` in the space, and the
        prompt's raw vector."""
        import numpy as np

        views = query_views(text, self.scoring.sentence_views)
        raw = self.encoder.encode_queries(views)
        if len(matrix) == 0:
            return np.zeros(0, dtype=np.float32), np.asarray(raw[0], dtype=np.float32)
        from memself.recall.row_threads import run_rows

        q = self.space.project(raw)  # (v, dim), orthogonal to comps
        # q . P(p - mu) = q . (p - mu) because q has no part along the components.
        shift = (q @ self.space.mean)[None, :]
        norms = self._row_norms(matrix, matrix_key)
        out = np.empty(len(matrix), dtype=np.float32)

        def fill(start: int, stop: int) -> None:
            scores = matrix[start:stop] @ q.T - shift
            scores /= norms[start:stop, None]
            out[start:stop] = scores.max(axis=1)

        run_rows(len(matrix), fill)
        return out, np.asarray(raw[0], dtype=np.float32)

    def dense_scores(self, text: str, matrix: np.ndarray, matrix_key: object = None) -> np.ndarray:
        """Best cosine over the prompt's views with every row of ``matrix``, in the space."""
        return self._row_scores(text, matrix, matrix_key)[0]

    def parts(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        rows: Sequence[int] | None = None,
        matrix_key: object = None,
        workspace: str | None = None,
    ) -> ScoreParts:
        """Every signal of ``text`` against the pool, apart (see ``ScoreParts``). ``workspace``
        (as in ``recall``) only picks the shortlist a shortlisted group's lexical overlap is
        scored on; the other signals do not depend on it."""
        import numpy as np

        pool = self._as_pool(memories, rows)
        row_scores, vector = self._row_scores(text, matrix, matrix_key)
        if self.scoring.general_shape:
            from memself.recall.shape import detector_features

            vector = np.concatenate([vector, np.asarray(detector_features(text), dtype=np.float32)])
        n = len(pool)
        if not n:
            dense_text = np.zeros(0, dtype=np.float32)
        elif pool.rows_are_positions and len(row_scores) == n:
            dense_text = row_scores  # the gather below would copy it unchanged
        else:
            dense_text = row_scores[pool.rows]
        dense, best_view = dense_text, np.zeros(n, dtype=np.int64)
        if self.scoring.applies_when and pool.view_matrix is not None:
            grid = row_scores[pool.view_matrix]
            best_view = grid.argmax(axis=1)
            dense = grid[np.arange(n), best_view]
        lexical_text = lexical = np.zeros(n, dtype=np.float32)
        weighted = tuple(g for g in GROUPS if self.scoring.lexical.get(g, 0.0))
        if weighted and n:
            tau = self.scoring.lexical_tau
            whole = tuple(g for g in weighted if g not in LEXICAL_SHORTLIST)
            if whole:
                lexical_text, lexical = pool.lexical_scores(text, whole, tau, self._tokens)
            else:
                lexical = np.zeros(n, dtype=np.float32)  # apart from lexical_text: both are written
            for g in weighted:
                if g in LEXICAL_SHORTLIST:
                    picked = _best(pool.members(g, workspace), dense, LEXICAL_SHORTLIST[g])
                    lexical_text[picked], lexical[picked] = pool.shortlist_lexical(text, picked, tau)
            if not (self.scoring.applies_when and self.scoring.applies_when_lexical):
                lexical = lexical_text
        general = 0.0
        entity = np.zeros(n, dtype=np.float32)
        if self.scoring.general is not None:
            general = float(general_probability(self.scoring.general, vector[None, :], [text])[0])
            if self.scoring.entity_relief and n:
                from memself.recall.entities import lookup_identifiers

                entity = pool.entity_mask(lookup_identifiers(text), self._names) * np.float32(
                    self.scoring.entity_relief
                )
        return ScoreParts(dense_text, dense, lexical_text, lexical, general, vector, best_view, entity)

    def fused(self, parts: ScoreParts, pool: RecallPool, prompt: bool = True) -> np.ndarray:
        """The score recall gates (``prompt``: views and the general-question penalty), or the
        plain one (text only: what dedup compares a new memory with)."""
        s = self.scoring
        if not prompt:
            return fuse(
                parts.dense_text, parts.lexical_text, pool.group, 0.0, s.lexical, {}, by_group=pool.by_group
            )
        penalty = s.general.penalty if s.general is not None else {}
        return fuse(
            parts.dense,
            parts.lexical,
            pool.group,
            parts.general,
            s.lexical,
            penalty,
            parts.entity,
            by_group=pool.by_group,
        )

    def extra_floors(self, pool: RecallPool) -> np.ndarray:
        """Per memory of the pool, how far above its group's floor it must score (``extra_floors``)."""
        import numpy as np

        applies, offset = self.scoring.applies_when, self.scoring.view_offset

        def build() -> np.ndarray:
            views = pool.has_views if applies else np.zeros(len(pool), dtype=bool)
            return extra_floors(pool.group, views, offset)

        return pool.derived(("extra_floors", applies, *sorted(offset.items())), build)

    def score(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        rows: Sequence[int] | None = None,
        matrix_key: object = None,
        prompt: bool = True,
        workspace: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(fused, dense)`` aligned with the pool (see ``fused``)."""
        import numpy as np

        pool = self._as_pool(memories, rows)
        if not len(pool):
            empty = np.zeros(0, dtype=np.float32)
            return empty, empty
        parts = self.parts(text, pool, matrix, matrix_key=matrix_key, workspace=workspace)
        return self.fused(parts, pool, prompt), (parts.dense if prompt else parts.dense_text)

    # -- recall

    def recall(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        params: GateParams,
        rows: Sequence[int] | None = None,
        matrix_key: object = None,
        workspace: str | None = None,
    ) -> RecallResult:
        """Gated per-group recall over the active memories of the pool that ``workspace`` sees
        (``RecallPool.members``). No side effects."""
        pool = self._as_pool(memories, rows)
        if len(pool):
            parts = self.parts(text, pool, matrix, matrix_key=matrix_key, workspace=workspace)
            fused = self.fused(parts, pool)
            extra = self.extra_floors(pool)
        else:
            parts, fused, extra = None, None, None
        head = max(params.top_k, 2)  # the gate looks at top1, top2 and the top k, nothing else
        groups: dict[str, GroupRecall] = {}
        for group in GROUPS:
            members = pool.members(group, workspace)
            if fused is None or parts is None or extra is None:
                out: GateOutcome[int] = gate_explained([], params.floors[group], params.margin, params.top_k)
                hits: list[Hit] = []
            else:
                top = _best(members, fused, head)
                out = gate_explained(
                    [(int(j), float(fused[j])) for j in top],
                    params.floors[group],
                    params.margin,
                    params.top_k,
                    extra.__getitem__ if extra.any() else None,
                )
                hits = [self._hit(pool, parts, j, s, float(extra[j])) for j, s in out.kept]
            groups[group] = GroupRecall(
                group, hits, out.reason, out.line, out.top1, out.floor, out.margin, len(members)
            )
        return RecallResult(text, groups)

    def _hit(self, pool: RecallPool, parts: ScoreParts, j: int, score: float, offset: float) -> Hit:
        memory = pool.memories[j]
        s = self.scoring
        view = int(parts.best_view[j]) if s.applies_when else 0
        penalty = (
            s.general.penalty.get(memory.category, 0.0) * parts.general * (1.0 - float(parts.entity[j]))
            if s.general is not None
            else 0.0
        )
        return Hit(
            memory.id,
            memory.text,
            score,
            memory.confidence,
            float(parts.dense[j]),
            s.lexical.get(memory.category, 0.0) * float(parts.lexical[j]),
            float(penalty),
            float(offset),
            pool.view_texts[j][view - 1] if view > 0 else "",
        )

    def top_k(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        k: int,
        rows: Sequence[int] | None = None,
        group: str | None = None,
        matrix_key: object = None,
        workspace: str | None = None,
    ) -> list[tuple[Memory, float]]:
        """The raw top-k of the active memories (of one group, or all) that ``workspace`` sees, by
        the plain fused score (text only, no penalty), best first: the ungated view for dedup. No
        floor, no rewards."""
        pool = self._as_pool(memories, rows)
        fused, _ = self.score(text, pool, matrix, matrix_key=matrix_key, prompt=False, workspace=workspace)
        top = _best(pool.members(group, workspace), fused, max(k, 0))
        return [(pool.memories[j], float(fused[j])) for j in top]

    def ranked(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        rows: Sequence[int] | None = None,
        group: str | None = None,
        matrix_key: object = None,
    ) -> list[tuple[Memory, float]]:
        """Every active memory (of one group, or all) by the plain fused score, best first."""
        pool = self._as_pool(memories, rows)
        return self.top_k(text, pool, matrix, len(pool), group=group, matrix_key=matrix_key)


def _best(members: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` members with the highest scores, best first (ties: lower position first)."""
    import numpy as np

    if k <= 0 or not len(members):
        return members[:0]
    sub = scores[members]
    if k < len(members):
        part = np.argpartition(-sub, k - 1)[:k]
        order = part[np.lexsort((part, -sub[part]))]
    else:
        order = np.lexsort((np.arange(len(sub)), -sub))
    return members[order]


def load_recaller(
    encoder: Encoder, model: str, cache_dir: Path | None = None, rebuild_space: bool = False
) -> Recaller:
    """A ``Recaller`` for ``model`` (the configured name) with its calibration (if it has one);
    ``rebuild_space`` re-encodes the space's sentences instead of reading the cache."""
    from memself.model.catalog import resolve_model

    scoring = ScoringSettings.from_model(resolve_model(model))
    space = load_space(encoder, scoring.space_dims, scoring.general_space, cache_dir, rebuild_space)
    return Recaller(encoder, space, scoring)
