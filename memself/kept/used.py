"""Did the answer use a recalled project fact? Decided locally, without a model request.

Two cheap signals: an identifier of the fact (a name with ``_``, ``.``, ``/``, ``-``, a digit or
inner capitals, or an upper-case word) appearing in the answer as written, and the embedding
similarity between the fact and the answer's closest sentence. The threshold is calibrated on
labelled pairs (``bench/kept_calibrate.py``, ``docs/recall.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# (facts, sentences) -> per fact, the highest cosine with any sentence.
SimilarityFn = Callable[[Sequence[str], Sequence[str]], list[float]]

SIMILARITY_LINE = 0.48
MAX_SENTENCES = 80
MIN_SENTENCE = 4
_SPLIT = re.compile(r"(?<=[。！？；!?;])|\n+|(?<=\.)\s+")
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:\-]*[A-Za-z0-9_]")
_IDENT_SHAPE = re.compile(r"[_./:\-\d]|[a-z][A-Z]|^[A-Z]{3,}$")


def sentences(answer: str) -> list[str]:
    """The answer's sentences worth comparing, at most ``MAX_SENTENCES`` of them."""
    found = [s.strip(" \t-*#>`") for s in _SPLIT.split(answer)]
    return [s for s in found if len(s) >= MIN_SENTENCE][:MAX_SENTENCES]


def identifiers(text: str) -> set[str]:
    """Names in ``text`` that only a reader of it would write: code-like tokens of 3+ characters."""
    return {t for t in _TOKEN.findall(text) if len(t) >= 3 and _IDENT_SHAPE.search(t)}


def shares_identifier(fact: str, answer: str) -> bool:
    return any(name in answer for name in identifiers(fact))


def used_facts(
    facts: Sequence[str], answer: str, similarity: SimilarityFn | None, line: float = SIMILARITY_LINE
) -> list[bool]:
    """For each fact: used by the answer. Without a similarity (no engine), identifiers only."""
    used = [shares_identifier(fact, answer) for fact in facts]
    rest = [i for i, u in enumerate(used) if not u]
    parts = sentences(answer)
    if rest and parts and similarity is not None:
        best = similarity([facts[i] for i in rest], parts)
        for i, score in zip(rest, best, strict=False):
            used[i] = score >= line
    return used
