"""A legacy confidence above 1 on an idle memory: the original decays first, then clamps.

The original's daily check (its README: 「超过上限 1 的值会在下一次日检时压到 1」) deducts 0.05 from a
memory idle for ``decayDays`` and then clamps what is above 1, so an idle 1.15 ends at 1. Clamping
first would deduct from 1 and leave 0.95: a user switching over would see their strongest rule
weakened on the first day.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from memself.maintenance import run_daily_maintenance
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.timeutil import iso
from tests.support.helpers import T0, by_id, days, make_store, record, write_records

ORIGINAL_STORE = Path(__file__).parents[1] / "fixtures" / "original-store"


def test_idle_memory_above_one_is_decayed_then_clamped() -> None:
    store = make_store()
    write_records(store, "rule", [record("big", "旧版置信度很高的规则", 1.15, last=T0 - days(31))])
    result = run_daily_maintenance(store.paths, 30, T0)
    memory = by_id(store, "big")
    assert memory.confidence == 1  # 1.15 - 0.05 = 1.1, then clamped to 1
    assert memory.lastSeen == iso(T0)  # the deduction happened: the idle period starts again
    assert result is not None and result.decayed == 1 and result.clamped == 1


def test_the_original_store_keeps_its_strongest_rule_at_one() -> None:
    """The original's own record: 1.15, last seen 2026-11-20, checked 35 days later."""
    paths = DataPaths.default()
    shutil.copytree(ORIGINAL_STORE, paths.root)
    now = datetime(2026, 12, 25, 9, 0, tzinfo=timezone.utc)
    run_daily_maintenance(paths, 30, now)
    rules = {m.id: m for m in MemoryStore(paths).read_group("rule")}
    assert rules["mem-mtfz46ql-w0i5wm"].confidence == 1
    assert rules["mem-mtg0a1b2-k3l4m5"].confidence == 0.65  # an ordinary idle rule: -0.05
    raw = [json.loads(line) for line in paths.group_file("rule").read_text("utf-8").splitlines()]
    assert [r["confidence"] for r in raw][:2] == [1, 0.65]
