"""Fact-to-sentence similarity with the engine's encoder (numpy: never on the hook path)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memself.encoder import Encoder

MAX_TEXTS = 80
MAX_CHARS = 400


def text_list(value: object) -> list[str]:
    """A request's list of texts, bounded; anything else is none."""
    if not isinstance(value, list):
        return []
    return [v[:MAX_CHARS] for v in value[:MAX_TEXTS] if isinstance(v, str) and v.strip()]


def best_cosines(encoder: Encoder, facts: Sequence[str], sentences: Sequence[str]) -> list[float]:
    """Per fact, its highest cosine with any sentence (0.0 when there are no sentences). Facts
    are encoded as memory passages and sentences as queries, as recall compares them."""
    if not facts:
        return []
    if not sentences:
        return [0.0] * len(facts)
    scores = encoder.encode_passages(facts) @ encoder.encode_queries(sentences).T
    return [round(float(row.max()), 6) for row in scores]
