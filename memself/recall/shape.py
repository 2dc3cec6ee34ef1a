"""A prompt's shape: how many words it has and which script it is written in.

Recall reads two things from it: the general-question detector takes the prompt's length as two
features beside its vector (a one-word prompt such as "pg?" is a lookup, not a general question,
however general its vector looks), and ``memself verify`` reports hits and leaks per shape (short
prompts, prompts in English, shorthand).

Words: each Latin-script token (``k8s``, ``CI``, ``redis-cli``) is one word, and a run of Chinese
characters counts one word per two characters (rounded up), the length of a typical Chinese word.
Standard library only: it runs on every prompt.
"""

from __future__ import annotations

import re

SHORT_WORDS = 4  # a prompt of at most this many words is short
_LATIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+#/&'-]*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def words(text: str) -> int:
    """The prompt's length in words (see the module doc)."""
    cjk = len(_CJK.findall(text))
    return len(_LATIN.findall(text)) + (cjk + 1) // 2


def is_short(text: str) -> bool:
    return words(text) <= SHORT_WORDS


def is_english(text: str) -> bool:
    """Written without Chinese characters and with at least one Latin word."""
    return not _CJK.search(text) and bool(_LATIN.search(text))


def detector_features(text: str) -> tuple[float, float]:
    """The length features the general-question detector reads beside the prompt's vector: one
    or two words, three or four words."""
    n = words(text)
    return (float(n <= 2), float(3 <= n <= SHORT_WORDS))


def prompt_shapes(text: str, tags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The shapes ``memself verify`` counts a prompt under: ``short`` (at most ``SHORT_WORDS``
    words), ``english``, then the case's own tags (e.g. ``shorthand``)."""
    out = [name for name, on in (("short", is_short(text)), ("english", is_english(text))) if on]
    return tuple(dict.fromkeys([*out, *tags]))
