"""Scoring: how close each memory is to a prompt, and the per-group recall built on it.

For one prompt and the memories of a pool (``Recaller``):

1. Dense: the prompt (and, for a prompt of several sentences, each sentence: a memory's score is
   the best over them, as the original took the max over several query texts) and every memory
   vector are moved into the model's *recall space* (``memself.background``: minus the
   background mean, minus its top principal directions, re-normalised); the score is the cosine
   there. Without principal directions this is exactly the original's centred cosine.
2. Lexical (``memself.lexical``): shared identifiers and Chinese words weighted by rarity, added
   with a per-group weight. Rules gain (a prompt that names the thing a rule governs); project facts
   do not (a general question about a public technology names it exactly like the fact does).
3. The gate (``memself.recall.gate``), per group, over the active memories.

Every weight is per model (``memself.models`` ``calibration``, read by ``ScoringSettings``) and
chosen with ``memself verify`` on the dev cases; a model without calibration gets the original's
plain centred cosine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memself.background import load_space
from memself.recall.gate import GateParams, gate_explained
from memself.recall.pool import RecallPool
from memself.recall.result import GroupRecall, Hit, RecallResult
from memself.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

    from memself.background import RecallSpace
    from memself.encoder import Encoder
    from memself.models import ModelSettings
    from memself.records import Memory

_MAX_EXTRA_VIEWS = 4
_SENTENCE_SPLIT = re.compile(r"[。！？；;!?\n]+")
_MIN_VIEW_CHARS = 4


@dataclass(frozen=True)
class ScoringSettings:
    """How one model scores (not the gate: floors, margin and top-k come from config).

    Read from ``ModelSettings.calibration`` (float values, by name):
    ``space_dims`` principal directions removed (0: plain centring);
    ``general_space`` 1 = the space is built from the shipped general prompts, 0 = from
    ``background_sentences.json``; ``lexical_rule`` / ``lexical_project`` fusion weights;
    ``lexical_tau`` saturation of the lexical overlap; ``sentence_views`` 1 = also score each
    sentence of a multi-sentence prompt; ``symmetric`` 1 = memories are encoded like prompts
    (e5's ``query: `` on both sides, its advice for text-to-text similarity; see
    ``memself.recall.memory_side``).
    """

    space_dims: int = 0
    general_space: bool = False
    lexical: dict[str, float] = field(default_factory=lambda: {g: 0.0 for g in GROUPS})
    lexical_tau: float = 20.0
    sentence_views: bool = False
    symmetric: bool = False

    @classmethod
    def from_model(cls, settings: ModelSettings) -> ScoringSettings:
        cal = settings.calibration or {}
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
        )

    @classmethod
    def for_model_id(cls, model_id: str) -> ScoringSettings:
        """Settings by the encoder's model id; an id outside the table gets the plain defaults."""
        from memself.errors import MemselfError
        from memself.models import resolve_model

        try:
            return cls.from_model(resolve_model(model_id))
        except MemselfError:
            return cls()

    @property
    def uses_lexical(self) -> bool:
        return any(w != 0.0 for w in self.lexical.values())


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

    def dense_scores(self, text: str, matrix: np.ndarray, matrix_key: object = None) -> np.ndarray:
        """Best cosine over the prompt's views with every row of ``matrix``, in the space."""
        import numpy as np

        if len(matrix) == 0:
            return np.zeros(0, dtype=np.float32)
        views = query_views(text, self.scoring.sentence_views)
        q = self.space.project(self.encoder.encode_queries(views))  # (v, dim), orthogonal to comps
        # q . P(p - mu) = q . (p - mu) because q has no part along the components.
        raw = matrix @ q.T - (q @ self.space.mean)[None, :]
        out = raw / self._row_norms(matrix, matrix_key)[:, None]
        return out.max(axis=1).astype(np.float32, copy=False)

    def score(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        rows: Sequence[int] | None = None,
        matrix_key: object = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(fused, dense)`` aligned with the pool (fused = dense + w_group x lexical)."""
        import numpy as np

        pool = self._as_pool(memories, rows)
        if not len(pool):
            empty = np.zeros(0, dtype=np.float32)
            return empty, empty
        dense = self.dense_scores(text, matrix, matrix_key)[pool.rows]
        fused = dense.copy()
        weighted = tuple(g for g in GROUPS if self.scoring.lexical.get(g, 0.0))
        if weighted:
            per_group = np.array([self.scoring.lexical.get(g, 0.0) for g in GROUPS] + [0.0], dtype=np.float32)
            lex = pool.lexical_scores(text, weighted, self.scoring.lexical_tau, self._tokens)
            fused += per_group[pool.group] * lex
        return fused, dense

    # -- recall

    def recall(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        params: GateParams,
        rows: Sequence[int] | None = None,
        matrix_key: object = None,
    ) -> RecallResult:
        """Gated per-group recall over the active memories of the pool. No side effects."""
        pool = self._as_pool(memories, rows)
        fused, dense = self.score(text, pool, matrix, matrix_key=matrix_key)
        head = max(params.top_k, 2)  # the gate looks at top1, top2 and the top k, nothing else
        groups: dict[str, GroupRecall] = {}
        for group in GROUPS:
            members = pool.members(group)
            top = _best(members, fused, head)
            out = gate_explained(
                [(int(j), float(fused[j])) for j in top], params.floors[group], params.margin, params.top_k
            )
            hits = [
                Hit(
                    pool.memories[j].id,
                    pool.memories[j].text,
                    s,
                    pool.memories[j].confidence,
                    float(dense[j]),
                    s - float(dense[j]),
                )
                for j, s in out.kept
            ]
            groups[group] = GroupRecall(
                group, hits, out.reason, out.line, out.top1, out.floor, out.margin, len(members)
            )
        return RecallResult(text, groups)

    def top_k(
        self,
        text: str,
        memories: RecallPool | Sequence[Memory],
        matrix: np.ndarray,
        k: int,
        rows: Sequence[int] | None = None,
        group: str | None = None,
        matrix_key: object = None,
    ) -> list[tuple[Memory, float]]:
        """The raw top-k of the active memories (of one group, or all) by fused score, best
        first: the ungated (``gate:false``) view for dedup and eval. No floor, no rewards."""
        pool = self._as_pool(memories, rows)
        fused, _ = self.score(text, pool, matrix, matrix_key=matrix_key)
        top = _best(pool.members(group), fused, max(k, 0))
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
        """Every active memory (of one group, or all) by fused score, best first."""
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
    """A ``Recaller`` for ``model`` (the configured name) with its table calibration;
    ``rebuild_space`` re-encodes the space's sentences instead of reading the cache."""
    from memself.models import resolve_model

    scoring = ScoringSettings.from_model(resolve_model(model))
    space = load_space(encoder, scoring.space_dims, scoring.general_space, cache_dir, rebuild_space)
    return Recaller(encoder, space, scoring)
