"""The memories a prompt is scored against, prepared once and reused for every prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memself.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

    from memself.index.sync import VectorIndex
    from memself.lexical import LexicalIndex
    from memself.records import Memory


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


def indexed_pool(memories: Sequence[Memory], index: VectorIndex) -> RecallPool:
    """The memories that have a vector in ``index``, with their rows, in the order given (a memory
    not encoded yet waits for the next sync)."""
    rows = index.rows([m.id for m in memories])
    kept = [(m, int(r)) for m, r in zip(memories, rows, strict=True) if r >= 0]
    return RecallPool([m for m, _ in kept], [r for _, r in kept])
