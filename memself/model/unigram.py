"""A Unigram (SentencePiece) tokenizer that loads faster and in less memory than ``tokenizers``' own.

``tokenizers`` keeps a Unigram vocabulary in a byte trie with a hash map per node: for a large
multilingual vocabulary (e5's) that costs more time and memory to load than the model's layers.
Here the pipeline stays the ``tokenizers`` one (added tokens, normalizer, pre-tokenizer,
post-processor, truncation all from the model's own ``tokenizer.json``); only the Unigram step
changes: a custom pre-tokenizer finds the best segmentation of each word (the same Viterbi
search, the same order of candidates, the same tie rule, the same unknown-character penalty and
fusing of unknown runs as ``tokenizers``' Unigram model), and a ``WordLevel`` model maps each
piece to its id.

Preparation writes the three files below only when this tokenizer gives the same ids as the full
one on a test set (``memself.model.prepare``); otherwise the runtime loads ``tokenizer.json``.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SHELL = "unigram-shell.json"
PIECES = "unigram-pieces.txt"
SCORES = "unigram-scores.npy"
FILES = (SHELL, PIECES, SCORES)
# tokenizers' Unigram: an unknown character costs the lowest piece score minus this.
UNK_PENALTY = 10.0
_SEP = "\x00"
# Below this the full tokenizer is small and fast enough already.
MIN_VOCAB = 30000


def applicable(spec: dict[str, Any]) -> bool:
    """Whether ``spec`` (a parsed tokenizer.json) has a Unigram model this module reproduces."""
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    return (
        model.get("type") == "Unigram"
        and not model.get("byte_fallback")
        and isinstance(model.get("unk_id"), int)
        and isinstance(vocab, list)
        and len(vocab) >= MIN_VOCAB
        and all(isinstance(p, str) and p and _SEP not in p for p, _ in vocab)
    )


def write(spec: dict[str, Any], folder: Path) -> None:
    """The shell (the tokenizer with a WordLevel model of the added tokens), pieces and scores."""
    import numpy as np

    model = spec["model"]
    pieces = [p for p, _ in model["vocab"]]
    unk = pieces[model["unk_id"]]
    shell = dict(spec)
    # The added tokens keep their ids only if the shell's model knows them at load time.
    known = {t["content"]: t["id"] for t in spec.get("added_tokens") or []}
    known[unk] = model["unk_id"]
    shell["model"] = {"type": "WordLevel", "vocab": known, "unk_token": unk}
    (folder / SHELL).write_text(json.dumps(shell, ensure_ascii=False), encoding="utf-8")
    meta = {"unk_id": model["unk_id"]}
    (folder / PIECES).write_text(json.dumps(meta) + "\n" + _SEP.join(pieces), encoding="utf-8")
    np.save(folder / SCORES, np.asarray([s for _, s in model["vocab"]], dtype=np.float64))


def load(folder: Path) -> Tokenizer:
    import numpy as np
    from tokenizers import Tokenizer, models, pre_tokenizers

    head, _, blob = (folder / PIECES).read_text(encoding="utf-8").partition("\n")
    unk_id = int(json.loads(head)["unk_id"])
    pieces = blob.split(_SEP)
    del blob
    scores = array("d", np.load(folder / SCORES, allow_pickle=False).astype(np.float64).tobytes())
    if len(scores) != len(pieces):
        raise ValueError("unigram pieces and scores differ in length")
    vocab = dict(zip(pieces, range(len(pieces)), strict=True))
    word_level = models.WordLevel(vocab, unk_token=pieces[unk_id])
    del vocab
    # The search looks pieces up in the WordLevel model's own vocabulary: a Python copy of it
    # (a dict of every piece) would double what the tokenizer keeps resident for the engine's life.
    search = _Viterbi(word_level.token_to_id, scores, unk_id, _longest_by_first(pieces))
    del pieces
    tokenizer = Tokenizer.from_file(str(folder / SHELL))
    tokenizer.model = word_level
    previous = tokenizer.pre_tokenizer
    custom = pre_tokenizers.PreTokenizer.custom(search)
    tokenizer.pre_tokenizer = custom if previous is None else pre_tokenizers.Sequence([previous, custom])
    return tokenizer


def _longest_by_first(pieces: list[str]) -> dict[str, int]:
    """Per first character, the longest piece starting with it: no longer span can be a piece."""
    longest: dict[str, int] = {}
    for piece in pieces:
        if len(piece) > longest.get(piece[0], 0):
            longest[piece[0]] = len(piece)
    return longest


class _Viterbi:
    """Splits each pre-tokenized word into its best-scoring pieces (see the module docstring)."""

    def __init__(
        self,
        id_of: Callable[[str], int | None],
        scores: Sequence[float],
        unk_id: int,
        longest: dict[str, int],
    ) -> None:
        self._id_of = id_of
        self._scores = scores
        self._unk_id = unk_id
        self._unk_score = min(scores) - UNK_PENALTY
        self._longest = longest

    def pre_tokenize(self, pretok: Any) -> None:
        pretok.split(self._split)

    def _split(self, _index: int, normalized: Any) -> list[Any]:
        return [normalized[a:b] for a, b in self.spans(str(normalized))]

    def spans(self, text: str) -> list[tuple[int, int]]:
        n = len(text)
        if n == 0:
            return []
        get, scores, unk_id, unk_score = self._id_of, self._scores, self._unk_id, self._unk_score
        longest = self._longest.get
        best = [float("-inf")] * (n + 1)
        best[0] = 0.0
        start_of = [0] * (n + 1)
        id_of = [-1] * (n + 1)
        for start in range(n):
            base = best[start]
            single = False
            for end in range(start + 1, min(n, start + longest(text[start], 0)) + 1):
                pid = get(text[start:end])
                if pid is None:
                    continue
                candidate = scores[pid] + base
                # Strictly better only: the first of equal candidates (the shortest) stays.
                if id_of[end] < 0 or candidate > best[end]:
                    best[end], start_of[end], id_of[end] = candidate, start, pid
                if end == start + 1:
                    single = True
            if not single:
                end = start + 1
                candidate = unk_score + base
                if id_of[end] < 0 or candidate > best[end]:
                    best[end], start_of[end], id_of[end] = candidate, start, unk_id
        spans: list[tuple[int, int]] = []
        end = n
        unk_end = -1  # consecutive unknown characters become one piece
        while end > 0:
            start = start_of[end]
            if id_of[end] == unk_id:
                if unk_end < 0:
                    unk_end = end
            else:
                if unk_end >= 0:
                    spans.append((end, unk_end))
                    unk_end = -1
                spans.append((start, end))
            end = start
        if unk_end >= 0:
            spans.append((0, unk_end))
        spans.reverse()
        return spans
