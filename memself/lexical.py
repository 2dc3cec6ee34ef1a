"""A lexical signal for recall: shared identifiers and Chinese words, weighted by rarity.

Why: a small embedding model ranks by topic and misses the literal link a user makes ("写个
Dockerfile" and the rule about Dockerfiles, "SQL" and the rule about SQL dialects). Words that
both texts contain, weighted by how rare they are in general Chinese (jieba's IDF table, which
ships with jieba), recover that link without looking at the memory pool, so it works with one
memory and does not change when memories are added.

The score of a query against a memory is ``1 - exp(-overlap / tau)``: ``overlap`` sums, over the
tokens both texts contain, the smaller of the two token weights. One rare shared word already
counts; more shared words saturate instead of growing without bound, so a long prompt that happens
to repeat a memory's vocabulary cannot outweigh the dense score.

Tokens: ASCII identifiers whole (lower-cased: ``waybill-svc``, ``config.go``), plus their parts
(``waybill``, ``svc``; camelCase split) at half weight; Chinese runs cut by jieba's search mode
(``运单详情`` -> ``运单``, ``详情``, ``运单详情``), words of two or more characters. A small English
stop list drops function words; Chinese function words have a low IDF and count for little.

jieba is imported lazily (it takes about a second to build its dictionary): never on the hook path.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# IDF given to tokens jieba's table does not know: identifiers and rare words are informative.
# About the table's median (11.95), i.e. a rare word.
UNKNOWN_IDF = 12.0
PART_WEIGHT = 0.5
DEFAULT_TAU = 20.0

_EN_STOP = frozenset(
    "a an the to of in on for and or is are be was were do does did i you we it this that my your "
    "our me us how what why when where which who can could should would will with without from by "
    "as at not no yes if then so but just please about into out up".split())
_ASCII = re.compile(r"[A-Za-z][A-Za-z0-9_$]*(?:[.\-/][A-Za-z0-9_$]+)*")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_PART_SPLIT = re.compile(r"[.\-/_$]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

_lock = threading.Lock()
_idf: dict[str, float] | None = None


def _load() -> dict[str, float]:
    """jieba's IDF table (270k words), loaded once; importing jieba happens here."""
    global _idf
    with _lock:
        if _idf is None:
            import jieba
            import jieba.analyse

            jieba.setLogLevel(60)  # its "Building prefix dict" chatter goes to stderr otherwise
            path = Path(jieba.analyse.__file__).with_name("idf.txt")
            table: dict[str, float] = {}
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    word, _, value = line.rstrip("\n").partition(" ")
                    if word and value:
                        table[word] = float(value)
            _idf = table
        return _idf


def idf(token: str) -> float:
    return _load().get(token, UNKNOWN_IDF)


def _parts(identifier: str) -> list[str]:
    out: list[str] = []
    for piece in _PART_SPLIT.split(identifier):
        out.extend(p.lower() for p in _CAMEL.findall(piece))
    return [p for p in out if len(p) > 1 and p not in _EN_STOP]


def tokens(text: str) -> dict[str, float]:
    """Token -> weight (its IDF, halved for identifier parts) for one text."""
    import jieba

    table = _load()
    out: dict[str, float] = {}

    def put(token: str, weight: float) -> None:
        if weight > out.get(token, 0.0):
            out[token] = weight

    for match in _ASCII.finditer(text):
        raw = match.group(0)
        whole = raw.lower()
        if len(whole) < 2 or whole in _EN_STOP:
            continue
        put(whole, table.get(whole, UNKNOWN_IDF))
        parts = _parts(raw)
        if len(parts) > 1:
            for part in parts:
                put(part, PART_WEIGHT * table.get(part, UNKNOWN_IDF))
    for match in _CJK.finditer(text):
        for word in jieba.lcut_for_search(match.group(0)):
            if len(word) >= 2:
                put(word, table.get(word, UNKNOWN_IDF))
    return out


def overlap_score(query: dict[str, float], memory: dict[str, float],
                  tau: float = DEFAULT_TAU) -> float:
    """``1 - exp(-sum of min weights of shared tokens / tau)``, in [0, 1)."""
    if len(memory) < len(query):
        shared = sum(min(w, query[t]) for t, w in memory.items() if t in query)
    else:
        shared = sum(min(w, memory[t]) for t, w in query.items() if t in memory)
    return 1.0 - math.exp(-shared / tau) if shared > 0 else 0.0


class LexicalIndex:
    """Token postings over a list of texts, so one query touches only the texts it shares a word
    with (a Python loop over 100k memories per prompt would cost far more than the dense product).

    Tokens of each distinct text are cached across rebuilds, so adding one memory re-tokenises one
    text.
    """

    def __init__(self, token_cache: dict[str, dict[str, float]] | None = None) -> None:
        # Shared with the next index when the caller passes the same dict; pruned on each
        # rebuild to the texts indexed, so it never outgrows the pool.
        self._token_cache: dict[str, dict[str, float]] = (
            token_cache if token_cache is not None else {})
        self._postings: dict[str, tuple[Any, Any]] = {}  # token -> (rows int64, weights float32)
        self._texts: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self._texts)

    def set_texts(self, texts: Sequence[str]) -> None:
        """Index exactly these texts (row order = scores order); cheap when nothing changed."""
        import numpy as np

        new = tuple(texts)
        if new == self._texts and (new or not self._postings):
            return
        lists: dict[str, tuple[list[int], list[float]]] = {}
        cache: dict[str, dict[str, float]] = {}
        for row, text in enumerate(new):
            toks = self._token_cache.get(text)
            if toks is None:
                toks = tokens(text)
            cache[text] = toks
            for token, weight in toks.items():
                rows, weights = lists.setdefault(token, ([], []))
                rows.append(row)
                weights.append(weight)
        self._token_cache.clear()
        self._token_cache.update(cache)
        self._postings = {t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32))
                          for t, (r, w) in lists.items()}
        self._texts = new

    def scores(self, query: str, tau: float = DEFAULT_TAU) -> np.ndarray:
        """``overlap_score`` of ``query`` against every indexed text, float32, row order."""
        import numpy as np

        shared = np.zeros(len(self._texts), dtype=np.float32)
        for token, q_weight in tokens(query).items():
            posting = self._postings.get(token)
            if posting is not None:
                rows, weights = posting  # a text holds a token once: rows are unique
                shared[rows] += np.minimum(weights, np.float32(q_weight))
        return (1.0 - np.exp(-shared / np.float32(tau))).astype(np.float32, copy=False)


def scores(query: str, texts: Iterable[str], tau: float = DEFAULT_TAU) -> np.ndarray:
    """One-off lexical scores of ``query`` against ``texts`` (no index kept)."""
    index = LexicalIndex()
    index.set_texts(list(texts))
    return index.scores(query, tau)
