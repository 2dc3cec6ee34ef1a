"""The memories a prompt is scored against, prepared once and reused for every prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memself.store.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

    from memself.index.sync import VectorIndex
    from memself.recall.lexical import LexicalIndex
    from memself.store.records import Memory


class RecallPool:
    """Memories prepared for repeated scoring: matrix rows, groups, the active mask, the rows of
    their appliesWhen views and (built on first use) the lexical postings of the groups scored
    whole (``lexical_scores``; a shortlist needs none: ``shortlist_lexical``). Build one when the
    memories change and reuse it per prompt; a plain list is turned into a throwaway pool.

    ``rows[i]`` is the matrix row of ``memories[i]``'s text (default: row i). ``views[i]`` (when
    given) are the matrix rows of its appliesWhen requests, in order, -1 for one without a vector
    (not encoded yet: it is left out until it has one). Active-ness is read once, here: rewards
    only raise confidence, and a deprecation comes with a reload of the memories.
    """

    def __init__(
        self,
        memories: Sequence[Memory],
        rows: Sequence[int] | None = None,
        views: Sequence[Sequence[int]] | None = None,
    ) -> None:
        import numpy as np

        self.memories = list(memories)
        n = len(self.memories)
        self.rows = (
            np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64).reshape(n)
        )
        self.active = np.fromiter((m.active for m in self.memories), dtype=bool, count=n)
        # Workspace codes: 0 for a global memory, then one per workspace key, in order of first use.
        codes_of = self._workspace_codes = {"": 0}
        self.workspace = np.fromiter(
            (codes_of.setdefault(m.workspace, len(codes_of)) for m in self.memories), dtype=np.int32, count=n
        )
        codes = {g: i for i, g in enumerate(GROUPS)}
        self.group = np.fromiter((codes.get(m.category, -1) for m in self.memories), dtype=np.int8, count=n)
        # The requests each memory is scored with besides its text (only those with a vector).
        self.view_texts: list[tuple[str, ...]] = [() for _ in range(n)]
        view_rows: list[list[int]] = [[] for _ in range(n)]
        if views is not None:
            for i, (memory, found) in enumerate(zip(self.memories, views, strict=True)):
                pairs = [(t, int(r)) for t, r in zip(memory.appliesWhen, found, strict=False) if int(r) >= 0]
                self.view_texts[i] = tuple(t for t, _ in pairs)
                view_rows[i] = [r for _, r in pairs]
        self.has_views = np.fromiter((bool(v) for v in view_rows), dtype=bool, count=n)
        width = max((len(v) for v in view_rows), default=0)
        # (n, 1 + width): the text row, then the view rows, padded with the text row so that a
        # row-wise max over it is the memory's best view; None when no memory has a view.
        self.view_matrix: np.ndarray | None = None
        if width:
            grid = np.repeat(self.rows[:, None], 1 + width, axis=1)
            for i, found in enumerate(view_rows):
                grid[i, 1 : 1 + len(found)] = found
            self.view_matrix = grid
        self._lexical: LexicalIndex | None = None
        self._lexical_groups: tuple[str, ...] = ()
        self._lexical_rows: np.ndarray | None = None
        self._lexical_grid: np.ndarray | None = None  # (m, 1 + width) targets of each lexical row
        self._names: dict[str, list[int]] | None = None  # identifier -> positions naming it
        # Arrays derived from the pool alone that every prompt would otherwise rebuild over every
        # memory: members per (group, workspace code), per-group lookups. Keys are bounded by
        # the groups, the pool's own workspaces and the scoring settings, never by prompts.
        self._derived: dict[tuple[object, ...], np.ndarray] = {}
        # Whether memory i's text is matrix row i (an index written in store order): its dense
        # scores are then the rows' scores as they are, no gather needed.
        self.rows_are_positions = bool(n) and bool(np.array_equal(self.rows, np.arange(n, dtype=np.int64)))

    def __len__(self) -> int:
        return len(self.memories)

    def lexical_scores(
        self,
        text: str,
        groups: tuple[str, ...],
        tau: float,
        token_cache: dict[str, dict[str, float]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Lexical overlap of ``text`` with the memories of ``groups`` (0 for the others): against
        the text alone, and the best over the text and its views. The postings cover only those
        groups and are built on first use (``token_cache``, text -> tokens, carries tokens over
        from an earlier pool so a reload re-tokenises only new texts)."""
        import numpy as np

        if self._lexical is None or self._lexical_groups != groups:
            from memself.recall.lexical import LexicalIndex

            codes = [GROUPS.index(g) for g in groups]
            lex_rows = np.flatnonzero(np.isin(self.group, codes))
            targets = [self.memories[i].text for i in lex_rows]
            width = max((len(self.view_texts[i]) for i in lex_rows), default=0)
            grid = np.repeat(np.arange(len(lex_rows), dtype=np.int64)[:, None], 1 + width, axis=1)
            for k, i in enumerate(lex_rows):
                for v, view in enumerate(self.view_texts[i]):
                    grid[k, 1 + v] = len(targets)
                    targets.append(view)
            index = LexicalIndex(token_cache)
            index.set_texts(targets)
            self._lexical, self._lexical_groups = index, groups
            self._lexical_rows, self._lexical_grid = lex_rows, grid
        assert self._lexical_rows is not None and self._lexical_grid is not None
        scores = self._lexical.scores(text, tau)
        text_only = np.zeros(len(self.memories), dtype=np.float32)
        best = np.zeros(len(self.memories), dtype=np.float32)
        text_only[self._lexical_rows] = scores[: len(self._lexical_rows)]
        best[self._lexical_rows] = scores[self._lexical_grid].max(axis=1)
        return text_only, best

    def shortlist_lexical(self, text: str, rows: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """``lexical_scores`` for the memories at ``rows`` only (aligned with ``rows``), without
        postings: each text and view is cut on first sight and kept in a bounded cache."""
        import numpy as np

        from memself.recall.lexical import overlap_scores

        texts = [self.memories[i].text for i in rows]
        owners: list[int] = []
        for k, i in enumerate(rows):
            texts.extend(self.view_texts[i])
            owners.extend([k] * len(self.view_texts[i]))
        scores = overlap_scores(text, texts, tau)
        text_only = scores[: len(rows)]
        best = text_only.copy()
        if owners:
            np.maximum.at(best, np.asarray(owners, dtype=np.int64), scores[len(rows) :])
        return text_only, best

    def entity_mask(
        self, names: frozenset[str], known: dict[str, frozenset[str]] | None = None
    ) -> np.ndarray:
        """Per memory, 1.0 when its text names one of ``names`` (``memself.recall.entities``),
        else 0.0. The memories' identifiers are computed once, on first use; ``known`` (text ->
        identifiers) carries them over from an earlier pool, so a reload reads only new texts."""
        import numpy as np

        mask = np.zeros(len(self.memories), dtype=np.float32)
        if not names:
            return mask
        if self._names is None:
            from memself.recall.entities import identifiers

            postings: dict[str, list[int]] = {}
            current: dict[str, frozenset[str]] = {}
            for i, memory in enumerate(self.memories):
                found = known.get(memory.text) if known is not None else None
                if found is None:
                    found = identifiers(memory.text)
                current[memory.text] = found
                for name in found:
                    postings.setdefault(name, []).append(i)
            if known is not None:  # only the current texts: the carry-over never grows past the pool
                known.clear()
                known.update(current)
            self._names = postings
        for name in names:
            mask[self._names.get(name, [])] = 1.0
        return mask

    def members(self, group: str | None, workspace: str | None = None) -> np.ndarray:
        """Positions of the active memories of ``group`` (or of all groups) that ``workspace``
        sees: the global ones and its own ("": global ones only; None: every workspace's)."""
        import numpy as np

        code = None if workspace is None else self._workspace_codes.get(workspace, 0)

        def build() -> np.ndarray:
            mask = self.active if group is None else self.active & (self.group == GROUPS.index(group))
            if code is not None:
                mask = mask & ((self.workspace == 0) | (self.workspace == code))
            return np.flatnonzero(mask)

        return self.derived(("members", group, code), build)

    def by_group(self, values: dict[str, float]) -> np.ndarray:
        """``group_table(values)[group]``: each memory's value of its group (0 for an unknown
        group), kept per distinct ``values``."""
        return self.derived(("by_group", *sorted(values.items())), lambda: group_table(values)[self.group])

    def derived(self, key: tuple[object, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
        """``build()``, kept under ``key`` for the life of the pool (read-only: it is shared).
        For arrays that depend on the pool and a few settings only, never on a prompt."""
        found = self._derived.get(key)
        if found is None:
            found = self._derived[key] = build()
            found.flags.writeable = False
        return found


def group_table(values: dict[str, float]) -> np.ndarray:
    """A lookup by group code (``RecallPool.group``; -1, an unknown group, reads 0)."""
    import numpy as np

    return np.array([values.get(g, 0.0) for g in GROUPS] + [0.0], dtype=np.float32)


def indexed_pool(memories: Sequence[Memory], index: VectorIndex) -> RecallPool:
    """The memories that have a vector in ``index``, with their rows and the rows of their views,
    in the order given (a memory not encoded yet waits for the next sync)."""
    from memself.index.sync import view_row_id

    rows = index.rows([m.id for m in memories])
    kept = [(m, int(r)) for m, r in zip(memories, rows, strict=True) if r >= 0]
    views = [
        index.rows([view_row_id(m.id, k) for k in range(len(m.appliesWhen))]).tolist()
        if m.appliesWhen
        else []
        for m, _ in kept
    ]
    return RecallPool([m for m, _ in kept], [r for _, r in kept], views)
