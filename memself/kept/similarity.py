"""Fact-to-sentence similarity with the engine's encoder (numpy: never on the hook path)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memself.model.encoder import Encoder
    from memself.recall.background import RecallSpace

MAX_TEXTS = 80
MAX_CHARS = 400


def text_list(value: object) -> list[str]:
    """A request's list of texts, bounded; anything else is none."""
    if not isinstance(value, list):
        return []
    return [v[:MAX_CHARS] for v in value[:MAX_TEXTS] if isinstance(v, str) and v.strip()]


def best_cosines(
    encoder: Encoder, facts: Sequence[str], sentences: Sequence[str], space: RecallSpace | None = None
) -> list[float]:
    """Per fact, its highest cosine with any sentence (0.0 when there are no sentences). Facts
    are encoded as memory passages and sentences as queries, and both moved into the recall
    space when one is given, as recall compares them: raw vectors of any two sentences in one
    language score high."""
    if not facts:
        return []
    if not sentences:
        return [0.0] * len(facts)
    left, right = encoder.encode_passages(facts), encoder.encode_queries(sentences)
    if space is not None:
        left, right = space.project(left), space.project(right)
    scores = left @ right.T
    return [round(float(row.max()), 6) for row in scores]
