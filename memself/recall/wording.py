"""The words of a prompt that the general-question detector reads beside its vector.

A small model's vector of "数据库用的啥" sits close to "数据库是什么": both are about databases. What
tells them apart is the wording: "用的啥", "我们", "where", "the" ask about our setup; "是什么",
"区别", "原理", "what is", "vs" ask in general. The detector therefore also reads which of a fixed
vocabulary of grams the prompt contains: each lower-cased Latin-script word, and each Chinese
character and pair of adjacent characters.

The vocabulary is learned, not written: the grams that occur in the prompts of at least a few
different case sets (teams) of the calibration, so that what is kept is how people ask rather
than what one team asks about. It ships in the model's calibration file with the detector's
weights. Standard library only besides numpy: it runs on every prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_LATIN = re.compile(r"[a-z0-9_]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_QUESTION = ("?", "？")
QUESTION_MARK = "?"  # the gram a question mark stands for


def grams(text: str) -> frozenset[str]:
    """The prompt's grams: ``w:`` a Latin-script word, ``c:`` one or two adjacent Chinese
    characters, ``?`` when it has a question mark."""
    lowered = text.lower()
    out = {"w:" + w for w in _LATIN.findall(lowered)}
    for run in _CJK.findall(lowered):
        out.update("c:" + ch for ch in run)
        out.update("c:" + run[i : i + 2] for i in range(len(run) - 1))
    if any(mark in lowered for mark in _QUESTION):
        out.add(QUESTION_MARK)
    return frozenset(out)


def vocabulary(groups: Iterable[Iterable[str]], min_groups: int) -> tuple[str, ...]:
    """The grams found in the texts of at least ``min_groups`` of ``groups`` (e.g. one group per
    case set), sorted."""
    seen: dict[str, int] = {}
    for texts in groups:
        for gram in frozenset().union(*(grams(t) for t in texts)):
            seen[gram] = seen.get(gram, 0) + 1
    return tuple(sorted(g for g, n in seen.items() if n >= min_groups))


def word_index(words: Sequence[str]) -> dict[str, int]:
    """Each word's column among the detector's word features."""
    return {w: i for i, w in enumerate(words)}


def word_features(texts: Sequence[str], index: Mapping[str, int], scale: float) -> np.ndarray:
    """Per text, which words of ``index`` (``word_index``) it contains, as a unit vector times
    ``scale`` (zeros when it contains none)."""
    import numpy as np

    out = np.zeros((len(texts), len(index)), dtype=np.float64)
    for row, text in enumerate(texts):
        hits = [index[g] for g in grams(text) if g in index]
        if hits:
            out[row, hits] = scale / len(hits) ** 0.5
    return out
