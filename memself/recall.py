"""Per-group recall: score every active memory against a prompt, then gate each group.

Scoring (``Recaller``), for one prompt and the memories of the pool:

1. Dense: the prompt (and, for a prompt of several sentences, each sentence: a memory's score is
   the best over them, as the original took the max over several query texts) and every memory
   vector are moved into the *recall space* of the model: minus the background mean, minus the
   top ``space_dims`` principal directions of the background sentences, re-normalised; the score
   is the cosine there. With ``space_dims = 0`` this is exactly the original's centred cosine.
   Why remove principal directions too (the "all-but-the-top" post-processing of Mu and
   Viswanath, 2018): a mean removes the one direction every prompt shares, but general coding
   questions ("X 和 Y 有什么区别", "写一个 X 的函数") share several, and those directions are what
   makes an unrelated prompt land near a memory about the same technology.
2. Lexical (``memself.lexical``): shared identifiers and Chinese words weighted by rarity, added
   with a per-group weight. Rules gain (a prompt that names the thing a rule governs); project facts
   do not (a general question about a public technology names it exactly like the fact does).

Every weight is per model (``memself.models`` ``calibration``) and chosen with ``memself verify``
on the dev cases; a model without calibration gets the original's plain centred cosine.

Gate (``gate``), separately for ``rule`` and ``project``, exactly as the original (section 2.3):
rank; floor >= 0 and top1 < floor -> nothing; margin >= 0 and top1 - top2 < margin -> nothing;
floor and margin both off -> plain top-k; else keep ``score >= max(floor, 0.6 * top1)`` and cut to
top-k. Only active memories take part. Nothing here rewards: the caller passes the hit ids to
``MemoryStore.reward_recall``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memself.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

    from memself.encoder import Encoder
    from memself.lexical import LexicalIndex
    from memself.models import ModelSettings
    from memself.records import Memory

T = TypeVar("T")

RELATIVE = 0.6  # the original's relative line: a hit must reach 0.6 x its group's top1
GENERAL_PROMPTS_FILE = "general_prompts.json"
_MAX_EXTRA_VIEWS = 4
_SENTENCE_SPLIT = re.compile(r"[。！？；;!?\n]+")
_MIN_VIEW_CHARS = 4


# ----------------------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class GateOutcome(Generic[T]):
    """What one group's gate did: the kept pairs and the line they had to pass.

    ``reason``: ``empty`` (no candidates), ``below-floor`` (top1 under the floor), ``margin``
    (top1 not far enough ahead of top2), ``top-k`` (floor and margin off: plain top-k), ``line``
    (kept what reached ``line``).
    """

    kept: list[tuple[T, float]]
    reason: str
    line: float | None
    top1: float | None
    floor: float
    margin: float


def gate_explained(
    pool: Sequence[tuple[T, float]], floor: float, margin: float, top_k: int
) -> GateOutcome[T]:
    """The original's gate over ``(item, score)`` pairs of one group; see the module doc."""
    ranked = sorted(pool, key=lambda pair: pair[1], reverse=True)
    k = max(int(top_k), 0)
    if not ranked:
        return GateOutcome([], "empty", None, None, floor, margin)
    top1 = ranked[0][1]
    if floor >= 0 and top1 < floor:
        return GateOutcome([], "below-floor", floor, top1, floor, margin)
    if margin >= 0:
        top2 = ranked[1][1] if len(ranked) > 1 else 0.0
        if top1 - top2 < margin:
            return GateOutcome([], "margin", None, top1, floor, margin)
    if floor < 0 and margin < 0:
        return GateOutcome(ranked[:k], "top-k", None, top1, floor, margin)
    line = max(floor, RELATIVE * top1) if floor >= 0 else RELATIVE * top1
    kept = [pair for pair in ranked[:k] if pair[1] >= line]
    return GateOutcome(kept, "line", line, top1, floor, margin)


def gate(pool: Sequence[tuple[T, float]], floor: float, margin: float, top_k: int) -> list[tuple[T, float]]:
    """The kept ``(item, score)`` pairs of one group, best first."""
    return gate_explained(pool, floor, margin, top_k).kept


# ------------------------------------------------------------------------------------ settings


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
    ``encode_memories``).
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


def encode_memories(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """Memory vectors as recall wants them: passage side, or query side for a model calibrated as
    symmetric. Everything that stores or compares memory vectors (the vector index, verify) calls
    this, so recall and storage never disagree about the side."""
    if ScoringSettings.for_model_id(encoder.model_id).symmetric:
        return encoder.encode_queries(list(texts))
    return encoder.encode_passages(list(texts))


# ---------------------------------------------------------------------------------- the space


@dataclass(frozen=True)
class RecallSpace:
    """Background mean plus the orthonormal directions removed after it (``(k, dim)``, k >= 0)."""

    model_id: str
    mean: np.ndarray
    components: np.ndarray

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """``normalize((v - mean) minus its part along the components)``, row-wise, float32."""
        import numpy as np

        v = np.atleast_2d(np.asarray(vectors, dtype=np.float32)) - self.mean
        if len(self.components):
            v = v - (v @ self.components.T) @ self.components
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def general_prompts_path() -> Path:
    from importlib import resources

    return Path(str(resources.files("memself") / "data" / GENERAL_PROMPTS_FILE))


def build_space(model_id: str, sentence_vectors: np.ndarray, dims: int) -> RecallSpace:
    """Mean and top ``dims`` principal directions of the (query-side) sentence vectors."""
    import numpy as np

    x = np.asarray(sentence_vectors, dtype=np.float32)
    mean = x.mean(axis=0).astype(np.float32)
    dims = min(max(dims, 0), max(len(x) - 1, 0))
    if dims:
        comps = np.linalg.svd(x - mean, full_matrices=False)[2][:dims].astype(np.float32)
    else:
        comps = np.zeros((0, x.shape[1]), dtype=np.float32)
    return RecallSpace(model_id, mean, comps)


def load_space(
    encoder: Encoder, scoring: ScoringSettings, cache_dir: Path | None = None, rebuild: bool = False
) -> RecallSpace:
    """The recall space of this model, cached beside the background means (``rebuild``: encode
    the sentences again and overwrite the cache, for ``memself build-background``).

    Without principal directions and without the general prompts it is exactly the background
    mean of ``memself.background`` (same cache file).
    """
    import numpy as np

    from memself import background

    if scoring.space_dims == 0 and not scoring.general_space:
        load = background.build_background if rebuild else background.load_background
        bg = load(encoder, cache_dir)
        return RecallSpace(
            encoder.model_id,
            np.asarray(bg.mean, dtype=np.float32),
            np.zeros((0, encoder.dim), dtype=np.float32),
        )
    path = general_prompts_path() if scoring.general_space else None
    sentences = background.load_sentences(path)
    digest = background.sentences_digest([*sentences, f"space_dims={scoring.space_dims}"])
    cache = background.cache_file(encoder.model_id, digest, cache_dir)
    rows = 1 + scoring.space_dims
    try:
        if rebuild:
            raise FileNotFoundError(cache)
        stored = np.load(cache, allow_pickle=False)
        if (
            stored.shape[1:] == (encoder.dim,)
            and 1 <= len(stored) <= rows
            and stored.dtype == np.float32
            and np.isfinite(stored).all()
        ):
            return RecallSpace(encoder.model_id, stored[0], stored[1:])
    except (OSError, ValueError):
        pass  # missing or unreadable: rebuild
    space = build_space(encoder.model_id, encoder.encode_queries(sentences), scoring.space_dims)
    background._save_npy(cache, np.vstack([space.mean[None, :], space.components]))
    return space


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Hit:
    id: str
    text: str
    score: float
    confidence: float
    dense: float
    lexical: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "score": round(self.score, 4),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class GroupRecall:
    """One group's hits and the gate's explanation (for ``memself recall``)."""

    group: str
    hits: list[Hit]
    reason: str
    line: float | None
    top1: float | None
    floor: float
    margin: float
    candidates: int


@dataclass(frozen=True)
class RecallResult:
    text: str
    groups: dict[str, GroupRecall]

    @property
    def hit_ids(self) -> list[str]:
        return [h.id for g in GROUPS for h in self.groups[g].hits]

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """``{"rule": [{"id","text","score","confidence"}...], "project": [...]}``."""
        return {g: [h.to_json() for h in self.groups[g].hits] for g in GROUPS}

    def to_detail(self) -> dict[str, Any]:
        """Everything, the gate's explanation included: what the engine sends ``memself recall``."""
        from dataclasses import asdict

        return {"text": self.text, "groups": {g: asdict(self.groups[g]) for g in GROUPS}}

    @classmethod
    def from_detail(cls, data: dict[str, Any]) -> RecallResult:
        groups: dict[str, GroupRecall] = {}
        for group in GROUPS:
            raw = dict(data["groups"][group])
            raw["hits"] = [Hit(**hit) for hit in raw["hits"]]
            groups[group] = GroupRecall(**raw)
        return cls(str(data["text"]), groups)


@dataclass(frozen=True)
class GateParams:
    """The gate's numbers from config (floors already resolved against the model's defaults)."""

    floors: dict[str, float]
    margin: float = -1.0
    top_k: int = 3


# ----------------------------------------------------------------------------------- scoring


def query_views(text: str, sentence_views: bool) -> list[str]:
    """The prompt itself, then (when enabled and there are several) its sentences."""
    views = [text]
    if sentence_views:
        parts = [p.strip() for p in _SENTENCE_SPLIT.split(text)]
        parts = [p for p in parts if len(p) >= _MIN_VIEW_CHARS and p != text.strip()]
        if len(parts) > 1:
            views.extend(parts[:_MAX_EXTRA_VIEWS])
    return views


class RecallPool:
    """Memories prepared for repeated scoring: matrix rows, groups, the active mask and (built on
    first use) the lexical postings. Build one when the memories change and reuse it per prompt;
    a plain list is turned into a throwaway pool.

    ``rows[i]`` is the matrix row of ``memories[i]`` (default: row i). Active-ness is read once,
    here: rewards only raise confidence, and a deprecation comes with a reload of the memories.
    """

    def __init__(self, memories: Sequence[Memory], rows: Sequence[int] | None = None) -> None:
        import numpy as np

        self.memories = list(memories)
        n = len(self.memories)
        self.rows = (
            np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64).reshape(n)
        )
        self.active = np.fromiter((m.active for m in self.memories), dtype=bool, count=n)
        codes = {g: i for i, g in enumerate(GROUPS)}
        self.group = np.fromiter((codes.get(m.category, -1) for m in self.memories), dtype=np.int8, count=n)
        self._lexical: LexicalIndex | None = None
        self._lexical_groups: tuple[str, ...] = ()
        self._lexical_rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.memories)

    def lexical_scores(
        self,
        text: str,
        groups: tuple[str, ...],
        tau: float,
        token_cache: dict[str, dict[str, float]] | None = None,
    ) -> np.ndarray:
        """Lexical overlap of ``text`` with the memories of ``groups`` (0 for the others); the
        postings cover only those groups and are built on first use (``token_cache``, text ->
        tokens, carries tokens over from an earlier pool so a reload re-tokenises only new
        texts)."""
        import numpy as np

        if self._lexical is None or self._lexical_groups != groups:
            from memself.lexical import LexicalIndex

            codes = [GROUPS.index(g) for g in groups]
            self._lexical_rows = np.flatnonzero(np.isin(self.group, codes))
            index = LexicalIndex(token_cache)
            index.set_texts([self.memories[i].text for i in self._lexical_rows])
            self._lexical, self._lexical_groups = index, groups
        out = np.zeros(len(self.memories), dtype=np.float32)
        out[self._lexical_rows] = self._lexical.scores(text, tau)
        return out

    def members(self, group: str | None) -> np.ndarray:
        """Positions of the active memories of ``group`` (or of all groups)."""
        import numpy as np

        mask = self.active if group is None else self.active & (self.group == GROUPS.index(group))
        return np.flatnonzero(mask)


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
    return Recaller(encoder, load_space(encoder, scoring, cache_dir, rebuild_space), scoring)


def gate_params(config: Any, model_settings: ModelSettings) -> GateParams:
    """Floors from config when the user set them, else the model's calibrated defaults."""
    rule = config.recallMinScore if config.is_set("recallMinScore") else model_settings.rule_floor
    project = (
        config.recallMinScoreProject
        if config.is_set("recallMinScoreProject")
        else model_settings.project_floor
    )
    return GateParams(
        {"rule": float(rule), "project": float(project)},
        float(config.recallMinMargin),
        int(config.recallTopK),
    )
