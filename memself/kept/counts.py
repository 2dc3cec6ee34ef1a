"""The counts memself keeps on a memory about what it earned, and the advice they lead to.

Optional fields beside the original's (the original's reader ignores them, and a rewrite keeps
them): how often a rule was found broken and when last, how often a project fact was recalled
into a checked turn and how often the answer used it. Nothing else about the turn is kept: no
answer text, no quote.
"""

from __future__ import annotations

from memself.store.records import Memory
from memself.text.messages import OFTEN_BROKEN_ADVICE

BROKEN = "brokenCount"
BROKEN_AT = "lastBrokenAt"
SHOWN = "shownCount"
USED = "usedCount"
# A rule found broken this often is worth rewording: it is shown as advice, never deleted.
OFTEN_BROKEN = 3


def count(memory: Memory, name: str) -> int:
    value = memory.extra.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def often_broken(memory: Memory) -> bool:
    return memory.category == "rule" and count(memory, BROKEN) >= OFTEN_BROKEN


def advice(memory: Memory) -> str:
    """What ``memself list``, the page and ``doctor`` say of a memory ("" when nothing)."""
    return OFTEN_BROKEN_ADVICE if often_broken(memory) else ""
