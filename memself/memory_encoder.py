"""The encoder as the vector index sees it: memories encoded on the side recall compares them on.

e5 is calibrated symmetric (``query: `` on memories too, its advice for text-to-text similarity),
and that side is part of the index's model identity: a calibration change then re-encodes the
index instead of silently mixing vectors of two sides. Everything that syncs the index (the
engine, ``memself recall``, ``memself rebuild-index``) goes through ``memory_side``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from memself.encoder import Encoder

QUERY_SIDE_SUFFIX = "#query-side"


class MemorySideEncoder:
    def __init__(self, encoder: Encoder) -> None:
        from memself.recall import ScoringSettings

        self.inner = encoder
        self.dim = encoder.dim
        symmetric = ScoringSettings.for_model_id(encoder.model_id).symmetric
        self.model_id = encoder.model_id + (QUERY_SIDE_SUFFIX if symmetric else "")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        from memself.recall import encode_memories

        return encode_memories(self.inner, texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)


def memory_side(encoder: Encoder) -> MemorySideEncoder:
    return encoder if isinstance(encoder, MemorySideEncoder) else MemorySideEncoder(encoder)
