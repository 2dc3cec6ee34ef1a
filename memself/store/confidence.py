"""Confidence rules of the seed README: how memories strengthen, cap and fade.

new 0.5; reinforce or merge +0.1; each recall injection +0.05; per memory per local day the total
gain is capped at the highest tier reached that day (the creation day counts as full); cap 1;
an effective gain refreshes ``lastSeen``. Idle for ``decayDays``: -0.05 once; ``<= 0.4`` is
deprecated. Every function mutates the given record and takes ``now`` from the caller.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memself.store.records import DEPRECATION_LINE, Memory, round_conf
from memself.timeutil import iso, local_day, parse_iso

RECALL_STEP = 0.05
REINFORCE_STEP = 0.1
DECAY_STEP = 0.05
CAP = 1.0


def _reached_today(memory: Memory, day: str) -> float:
    if memory.gainDay == day:
        return memory.gainToday
    created = parse_iso(memory.createdAt)
    # Records written by the original carry no gain fields: their creation day still counts as full.
    if created is not None and local_day(created) == day:
        return REINFORCE_STEP
    return 0.0


def apply_gain(memory: Memory, tier: float, now: datetime) -> float | None:
    """Raise confidence towards today's ``tier``. Returns the gain added, or None if not effective.

    "Effective" means today's tier was not reached yet; an effective gain at the cap adds 0 but
    still refreshes ``lastSeen`` (seed README).
    """
    day = local_day(now)
    reached = _reached_today(memory, day)
    allowed = round_conf(tier - reached)
    if allowed <= 0:
        return None
    before = memory.confidence
    memory.confidence = round_conf(min(CAP, before + allowed))
    memory.gainDay = day
    memory.gainToday = tier
    memory.lastSeen = iso(now)
    return round_conf(max(0.0, memory.confidence - before))


def reinforce(memory: Memory, now: datetime) -> float:
    """+0.1 within the daily cap; an explicit reinforce above the line revives a deprecated memory."""
    gain = apply_gain(memory, REINFORCE_STEP, now) or 0.0
    if memory.deprecated and memory.confidence > DEPRECATION_LINE:
        memory.deprecated = False
    return gain


def reward_recall(memory: Memory, now: datetime) -> float | None:
    """+0.05 for an actual recall injection; never revives (deprecated memories are not recalled)."""
    return apply_gain(memory, RECALL_STEP, now)


def is_due(memory: Memory, now: datetime, decay_days: int) -> bool | None:
    """Whether an active memory has been idle ``decay_days``; None when its timestamp is invalid."""
    last = parse_iso(memory.last_active)
    if last is None:
        return None
    return now - last >= timedelta(days=decay_days)


def decay(memory: Memory, now: datetime) -> None:
    """One deduction, however many periods passed; the fresh lastSeen makes a retry deduct nothing."""
    memory.confidence = round_conf(memory.confidence - DECAY_STEP)
    memory.lastSeen = iso(now)
    if memory.confidence <= DEPRECATION_LINE:
        memory.deprecated = True


def clamp_legacy(memory: Memory) -> bool:
    """Clamp a legacy value above 1; mark a memory at or below the line deprecated."""
    changed = False
    if memory.confidence > CAP:
        memory.confidence = CAP
        changed = True
    if not memory.deprecated and memory.confidence <= DEPRECATION_LINE:
        memory.deprecated = True
        changed = True
    return changed
