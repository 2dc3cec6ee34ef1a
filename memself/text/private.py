"""``<private>`` spans: what the user marks as not for memself, cut from a prompt before anything
reads it (recall, the judge, its job file, the hashes sealed into it).

Tags are case-insensitive and read through ``memself.text.fold``, so ``＜private＞`` typed in a
Chinese input mode, or a tag with a zero-width character inside, hides as much as the ASCII one.
Spans nest: text stays hidden until every opening tag is closed, and an opening tag that is never
closed hides everything after it. A closing tag with nothing open is dropped and the text around
it kept. Fences and other markup inside a span mean nothing: the span is cut first.

Standard library only (on the hook path); a prompt without a ``<`` of any kind costs one scan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memself.text.fold import fold

# "<private>", "< PRIVATE >", "<private reason='x'>"; "</private>", "< / private >".
_TAG = re.compile(r"<\s*(/)?\s*private\b[^<>]*>", re.IGNORECASE)
# "<" and every character the fold table turns into one (a test holds this to the table): a
# prompt without any needs no folding, which a long paste would pay for on every prompt.
OPENERS = re.compile(
    "[<\u02c2\u1438\u16b2\u2039\u226a\u226e\u22d8\u2329\u276c\u276e\u2770\u27e8\u29fc"
    "\u2aa5\u3008\ufe64\uff1c\U0001d236]"
)
# Invisible format characters the fold keeps: a tag with one inside still reads as a tag.
_INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _view(text: str) -> tuple[str, Sequence[int] | None]:
    """``text`` as a reader takes it, and for each of its characters the index in ``text`` of
    the character it came from (None: the same index)."""
    folded = fold(text)
    if not _INVISIBLE.search(folded.text):
        return folded.text, folded.origin
    origin = folded.origin if folded.origin is not None else range(len(text))
    kept = [i for i, char in enumerate(folded.text) if not _INVISIBLE.match(char)]
    return "".join(folded.text[i] for i in kept), [origin[i] for i in kept]


def strip_private(text: str) -> str:
    """``text`` without its private spans and private tags; each cut becomes one space, or one
    line break when it held one, so the words and lines around it stay apart."""
    if not OPENERS.search(text):
        return text
    view, origin = _view(text)
    pieces: list[str] = []
    depth = 0
    kept_from = 0  # where the text after the last cut starts
    cut_from = -1  # where the current cut started
    for match in _TAG.finditer(view):
        start, end = match.start(), match.end()
        if origin is not None:
            start, end = origin[start], origin[end - 1] + 1
        if depth == 0:
            pieces.append(text[kept_from:start])
            cut_from = start
        if match.group(1):
            depth = max(depth - 1, 0)
        else:
            depth += 1
        if depth == 0:
            pieces.append("\n" if "\n" in text[cut_from:end] else " ")
            kept_from = end
    if depth == 0:
        pieces.append(text[kept_from:])
    return "".join(pieces)
