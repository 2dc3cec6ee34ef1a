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

Segmentation runs on ``rjieba`` (jieba-rs): the same dictionary, HMM and search-mode rules as
jieba's ``lcut_for_search``, with its dictionary compiled in, so it is ready in a fraction of the
time jieba's prefix dictionary takes to build. The IDF table stays jieba's ``analyse/idf.txt``:
the file is located without importing jieba, parsed once, and kept as a checked hash table in the
model cache (``lexical/jieba-idf.bin``), which later processes read instead of parsing the text
again. ``warm_up`` loads both; it is safe to call from any thread, and ``tokens`` loads them on
first use otherwise. Nothing here is imported on the hook path.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import struct
import sys
import threading
import zlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.atomic import write_atomic
from memself.errors import MemselfError, WriteFailed

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
    "as at not no yes if then so but just please about into out up".split()
)
_ASCII = re.compile(r"[A-Za-z][A-Za-z0-9_$]*(?:[.\-/][A-Za-z0-9_$]+)*")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
# jieba segments only U+4E00..U+9FD5 as Chinese and emits every other character of a run on its
# own (dropped below: one character); jieba-rs would segment them with their neighbours. Cutting
# a run at those characters first gives jieba's tokens.
_JIEBA_HAN = re.compile(r"[\u4e00-\u9fd5]+")
_PART_SPLIT = re.compile(r"[.\-/_$]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# The cache file: header, then float64 values, uint32 word offsets (n + 1), uint32 open-addressing
# slots (crc32 of the UTF-8 word, linear probing), then the words' UTF-8 bytes back to back.
CACHE_FORMAT = 1
_MAGIC = b"MSLXIDF1"
_HEADER = struct.Struct("<8s32s32sIII")  # magic, source key, sha256 of the body, words, slots, max probe
_EMPTY = 0xFFFFFFFF
# IDF lookups remembered: prompts bring new words for as long as the engine lives, so the memo is
# bounded to what a working set of words needs.
_MEMO_SIZE = 1 << 12


class LexicalDataError(MemselfError):
    """jieba's IDF table (the lexical signal's word weights) cannot be found or read."""


@dataclass(frozen=True)
class _Lexicon:
    cut: Callable[[str], list[str]]  # search-mode segmentation of one run of Chinese characters
    idf: Callable[[str], float]  # IDF of a token, UNKNOWN_IDF when the table lacks it
    idf_origin: str  # "cache" (read the prepared table) or "source" (parsed idf.txt)


_lock = threading.Lock()
_lexicon: _Lexicon | None = None
# How many times the tables were loaded in this process: warm-up loads them, nothing else should.
load_count = 0


def idf_source_path() -> Path:
    """jieba's ``analyse/idf.txt``, found through the installed package without importing it."""
    spec = importlib.util.find_spec("jieba")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / "analyse" / "idf.txt"
        if path.is_file():
            return path
    raise LexicalDataError("找不到 jieba 的词频表 analyse/idf.txt：请重新安装 memself（它依赖 jieba 包）。")


def parse_idf(path: Path) -> dict[str, float]:
    """``word value`` lines of jieba's IDF file as a dict."""
    table: dict[str, float] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            word, _, value = line.rstrip("\n").partition(" ")
            if word and value:
                table[word] = float(value)
    return table


def cache_path(cache_dir: Path | None = None) -> Path:
    from memself.paths import model_cache_dir

    return (cache_dir or model_cache_dir()) / "lexical" / "jieba-idf.bin"


def _source_key(source: Path) -> bytes:
    """What the cache was built from: a different file, size, mtime, format or byte order rebuilds it."""
    st = source.stat()
    ident = f"{CACHE_FORMAT}\0{source.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{sys.byteorder}"
    return hashlib.sha256(ident.encode("utf-8", "surrogatepass")).digest()


class IdfTable:
    """jieba's IDF table as flat arrays and an open-addressing hash on crc32: loading it is a read
    and a checksum, with no per-word Python objects until a word is looked up."""

    def __init__(self, values: array, offsets: array, slots: array, blob: bytes, max_probe: int) -> None:
        self._values = values
        self._offsets = offsets
        self._slots = slots
        self._blob = blob
        self._mask = len(slots) - 1
        self._max_probe = max_probe
        self._n = len(values)

    def __len__(self) -> int:
        return self._n

    @classmethod
    def build(cls, table: dict[str, float]) -> IdfTable:
        words = [w.encode("utf-8") for w in table]
        n = len(words)
        size = 1
        while size * 3 < n * 5 + 1:  # at most 60 % full: short probes and always an empty slot
            size <<= 1
        slots = array("I", [_EMPTY]) * size
        mask = size - 1
        offsets = array("I", [0]) * (n + 1)
        pos = max_probe = 0
        for i, word in enumerate(words):
            offsets[i] = pos
            pos += len(word)
            h = zlib.crc32(word) & mask
            probe = 1
            while slots[h] != _EMPTY:
                h = (h + 1) & mask
                probe += 1
            slots[h] = i
            max_probe = max(max_probe, probe)
        offsets[n] = pos
        return cls(array("d", table.values()), offsets, slots, b"".join(words), max_probe)

    def to_bytes(self, key: bytes) -> bytes:
        body = self._values.tobytes() + self._offsets.tobytes() + self._slots.tobytes() + self._blob
        return (
            _HEADER.pack(
                _MAGIC, key, hashlib.sha256(body).digest(), self._n, len(self._slots), self._max_probe
            )
            + body
        )

    @classmethod
    def from_bytes(cls, data: bytes, key: bytes) -> IdfTable | None:
        """The table, or None when the bytes are not a whole, intact cache of this very source."""
        if len(data) < _HEADER.size:
            return None
        magic, got_key, digest, n, n_slots, max_probe = _HEADER.unpack_from(data)
        body = memoryview(data)[_HEADER.size :]
        if magic != _MAGIC or got_key != key or hashlib.sha256(body).digest() != digest:
            return None
        fixed = 8 * n + 4 * (n + 1) + 4 * n_slots
        if n_slots < n + 1 or n_slots & (n_slots - 1) or not 0 < max_probe <= n_slots or len(body) < fixed:
            return None
        values, offsets, slots = array("d"), array("I"), array("I")
        values.frombytes(body[: 8 * n])
        offsets.frombytes(body[8 * n : 8 * n + 4 * (n + 1)])
        slots.frombytes(body[8 * n + 4 * (n + 1) : fixed])
        blob = bytes(body[fixed:])
        if offsets[0] != 0 or offsets[n] != len(blob):
            return None
        return cls(values, offsets, slots, blob, max_probe)

    def get(self, word: str, default: float = UNKNOWN_IDF) -> float:
        key = word.encode("utf-8", "surrogatepass")
        slots, offsets, blob, mask, n = self._slots, self._offsets, self._blob, self._mask, self._n
        h = zlib.crc32(key) & mask
        for _ in range(self._max_probe):
            entry = slots[h]
            if entry >= n:  # empty (or out of range in a damaged file): not in the table
                return default
            if blob[offsets[entry] : offsets[entry + 1]] == key:
                return self._values[entry]
            h = (h + 1) & mask
        return default


def _read_cache(path: Path, key: bytes) -> IdfTable | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return IdfTable.from_bytes(data, key)


def _write_cache(path: Path, data: bytes) -> bool:
    """Atomic replace; False (and nothing left behind) when the folder is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except (OSError, WriteFailed):
        return False
    return True


def load_idf_table(cache_dir: Path | None = None, source: Path | None = None) -> tuple[IdfTable, str]:
    """``(table, origin)``: the cached table when it is intact and built from this very source
    (origin "cache"); otherwise parsed from the source and written back (origin "source")."""
    source = source or idf_source_path()
    try:
        key = _source_key(source)
    except OSError as exc:
        raise LexicalDataError(f"读不了 jieba 的词频表 {source}：{exc}") from exc
    path = cache_path(cache_dir)
    table = _read_cache(path, key)
    if table is not None:
        return table, "cache"
    try:
        parsed = parse_idf(source)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LexicalDataError(f"读不了 jieba 的词频表 {source}：{exc}") from exc
    table = IdfTable.build(parsed)
    _write_cache(path, table.to_bytes(key))  # best effort: a read-only cache only costs speed
    return table, "source"


def _get() -> _Lexicon:
    global _lexicon, load_count
    lexicon = _lexicon
    if lexicon is not None:
        return lexicon
    with _lock:
        if _lexicon is None:
            import rjieba

            table, origin = load_idf_table()
            cut = rjieba.cut_for_search

            def segment(run: str) -> list[str]:
                # HMM for unknown words, as jieba's lcut_for_search
                return [word for piece in _JIEBA_HAN.findall(run) for word in cut(piece, True)]

            _lexicon = _Lexicon(segment, functools.lru_cache(maxsize=_MEMO_SIZE)(table.get), origin)
            load_count += 1
        return _lexicon


def warm_up() -> str:
    """Load the segmenter and the IDF table now (any thread); returns where the table came from."""
    return _get().idf_origin


def idf(token: str) -> float:
    return _get().idf(token)


def _parts(identifier: str) -> list[str]:
    out: list[str] = []
    for piece in _PART_SPLIT.split(identifier):
        out.extend(p.lower() for p in _CAMEL.findall(piece))
    return [p for p in out if len(p) > 1 and p not in _EN_STOP]


def tokens(text: str) -> dict[str, float]:
    """Token -> weight (its IDF, halved for identifier parts) for one text."""
    lexicon = _get()
    return tokens_with(text, lexicon.cut, lexicon.idf)


def tokens_with(
    text: str, cut: Callable[[str], list[str]], idf_of: Callable[[str], float]
) -> dict[str, float]:
    """``tokens`` with a given segmenter (of one run of U+4E00..U+9FFF) and IDF lookup."""
    out: dict[str, float] = {}

    def put(token: str, weight: float) -> None:
        if weight > out.get(token, 0.0):
            out[token] = weight

    for match in _ASCII.finditer(text):
        raw = match.group(0)
        whole = raw.lower()
        if len(whole) < 2 or whole in _EN_STOP:
            continue
        put(whole, idf_of(whole))
        parts = _parts(raw)
        if len(parts) > 1:
            for part in parts:
                put(part, PART_WEIGHT * idf_of(part))
    for match in _CJK.finditer(text):
        for word in cut(match.group(0)):
            if len(word) >= 2:
                put(word, idf_of(word))
    return out


# Texts whose tokens ``overlap_scores`` keeps: the shortlists of a few dozen recent prompts.
# Bounded because a shortlist is drawn from a pool of any size.
SHORTLIST_TOKEN_TEXTS = 4096


@functools.lru_cache(maxsize=SHORTLIST_TOKEN_TEXTS)
def _kept_tokens(text: str) -> dict[str, float]:
    return tokens(text)  # shared between callers: read, never changed


def overlap_scores(query: str, texts: Sequence[str], tau: float = DEFAULT_TAU) -> np.ndarray:
    """``LexicalIndex.scores`` of ``query`` against just ``texts``, without postings: for a
    shortlist drawn from a pool too large to index whole (postings over every project fact of a
    large store take seconds to build and hundreds of MB to keep: docs/benchmarks.md)."""
    import numpy as np

    query_tokens = tokens(query).items()
    shared = np.zeros(len(texts), dtype=np.float32)
    for row, text in enumerate(texts):
        found = _kept_tokens(text)
        shared[row] = sum(min(found[t], w) for t, w in query_tokens if t in found)
    return _saturated(shared, tau)


def _saturated(shared: np.ndarray, tau: float) -> np.ndarray:
    """``1 - exp(-shared / tau)``, float32: the score of a summed overlap (module doc)."""
    import numpy as np

    return (1.0 - np.exp(-shared / np.float32(tau))).astype(np.float32, copy=False)


class LexicalIndex:
    """Token postings over a list of texts, so one query touches only the texts it shares a word
    with (a Python loop over 100k memories per prompt would cost far more than the dense product).

    Tokens of each distinct text are cached across rebuilds, so adding one memory re-tokenises one
    text.
    """

    def __init__(self, token_cache: dict[str, dict[str, float]] | None = None) -> None:
        # Shared with the next index when the caller passes the same dict; pruned on each
        # rebuild to the texts indexed, so it never outgrows the pool.
        self._token_cache: dict[str, dict[str, float]] = token_cache if token_cache is not None else {}
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
        self._postings = {
            t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32)) for t, (r, w) in lists.items()
        }
        self._texts = new

    def scores(self, query: str, tau: float = DEFAULT_TAU) -> np.ndarray:
        """``1 - exp(-shared / tau)`` of ``query`` against every indexed text, float32, row order,
        where ``shared`` sums the smaller weight of each token the two share (a value in [0, 1))."""
        import numpy as np

        shared = np.zeros(len(self._texts), dtype=np.float32)
        for token, q_weight in tokens(query).items():
            posting = self._postings.get(token)
            if posting is not None:
                rows, weights = posting  # a text holds a token once: rows are unique
                shared[rows] += np.minimum(weights, np.float32(q_weight))
        return _saturated(shared, tau)
