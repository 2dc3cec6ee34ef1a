"""Which side of the encoder memories are encoded on: the side recall compares them on.

e5 is calibrated symmetric (``query: `` on memories too, its advice for text-to-text similarity),
and that side is part of the index's model identity: a calibration change then re-encodes the
index instead of silently mixing vectors of two sides. Everything that stores or compares memory
vectors goes through here: the index syncs (the engine, ``memself recall``, ``memself
rebuild-index``) through ``memory_side``, ``memself verify`` through ``encode_memories``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memself.index.files import read_header
from memself.recall.scoring import ScoringSettings

if TYPE_CHECKING:
    import numpy as np

    from memself.model.encoder import Encoder

QUERY_SIDE_SUFFIX = "#query-side"


def encode_memories(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """Memory vectors as recall wants them: passage side, or query side for a model calibrated as
    symmetric."""
    if ScoringSettings.for_model_id(encoder.model_id).symmetric:
        return encoder.encode_queries(list(texts))
    return encoder.encode_passages(list(texts))


class MemorySideEncoder:
    """An encoder whose passages are memories as ``encode_memories`` encodes them, and whose model
    id says which side that is (what the vector index is keyed by). ``views``: recall scores a
    memory's appliesWhen requests too, so the index keeps a row for each (``memself.index.sync``);
    they are encoded on the same side as the memory text."""

    def __init__(self, encoder: Encoder) -> None:
        self.inner = encoder
        self.dim = encoder.dim
        scoring = ScoringSettings.for_model_id(encoder.model_id)
        self.model_id = encoder.model_id + (QUERY_SIDE_SUFFIX if scoring.symmetric else "")
        self.views = scoring.applies_when

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return encode_memories(self.inner, texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)


LOCAL_PREFIX = "local:"  # a local folder's model id (memself.model.catalog)


def indexed_model(index_dir: Path) -> str | None:
    """The model the vector index on disk belongs to, as ``config.json`` would name it; None when
    there is no readable index."""
    header = read_header(index_dir)
    model = header.get("model") if isinstance(header, dict) else None
    if not isinstance(model, str) or not model:
        return None
    model = model.removesuffix(QUERY_SIDE_SUFFIX)
    return model.removeprefix(LOCAL_PREFIX) or None


def memory_side(encoder: Encoder) -> MemorySideEncoder:
    return encoder if isinstance(encoder, MemorySideEncoder) else MemorySideEncoder(encoder)
