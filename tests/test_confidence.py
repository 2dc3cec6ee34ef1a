"""The seed README's confidence rules, driven by a moving clock."""

from __future__ import annotations

import pytest

from memself.store.confidence import apply_gain, decay, reinforce, reward_recall
from memself.store.records import Memory
from tests.support.helpers import T0, days


def fresh(conf: float = 0.5, age_days: float = 100) -> Memory:
    memory = Memory.create("回答一律使用中文回复", "rule", T0 - days(age_days))
    memory.confidence = conf
    return memory


@pytest.mark.parametrize("wish", [None, 0, -1, 0.9, 3, float("nan"), float("inf")])
def test_every_create_starts_at_half(wish: object) -> None:
    memory = Memory.create("所有异常处理处都需要添加日志", "rule", T0)
    assert memory.confidence == 0.5
    assert "observations" not in memory.to_json()


def test_creation_day_counts_as_full() -> None:
    memory = Memory.create("所有异常处理处都需要添加日志", "rule", T0)
    assert reward_recall(memory, T0 + days(0.01)) is None
    assert reinforce(memory, T0 + days(0.01)) == 0
    assert memory.confidence == 0.5
    assert reward_recall(memory, T0 + days(1)) == 0.05


def test_reinforce_and_recall_steps() -> None:
    memory = fresh()
    assert reinforce(memory, T0) == pytest.approx(0.1)
    assert memory.confidence == 0.6
    assert reward_recall(memory, T0 + days(1)) == pytest.approx(0.05)
    assert memory.confidence == 0.65


def test_daily_cap_recall_then_reinforce_tops_up_to_tier() -> None:
    memory = fresh()
    assert reward_recall(memory, T0) == pytest.approx(0.05)
    assert reward_recall(memory, T0) is None  # second recall the same day adds nothing
    assert reinforce(memory, T0) == pytest.approx(0.05)  # only the difference up to 0.1
    assert reinforce(memory, T0) == 0
    assert memory.confidence == 0.6


def test_reinforce_then_recall_same_day_adds_nothing() -> None:
    memory = fresh()
    reinforce(memory, T0)
    assert reward_recall(memory, T0) is None
    assert memory.confidence == 0.6


def test_cap_at_one_but_first_effective_gain_refreshes_last_seen() -> None:
    memory = fresh(conf=0.98)
    assert reinforce(memory, T0) == pytest.approx(0.02)
    assert memory.confidence == 1
    later = T0 + days(3)
    assert reward_recall(memory, later) == 0
    assert memory.lastSeen.startswith(later.strftime("%Y-%m-%d"))


def test_legacy_value_above_one_is_clamped_by_a_gain() -> None:
    memory = fresh(conf=1.15)
    assert reinforce(memory, T0) == 0
    assert memory.confidence == 1


def test_decay_boundary_without_float_drift() -> None:
    memory = fresh(conf=0.45)
    decay(memory, T0)
    assert memory.confidence == 0.4
    assert repr(memory.confidence) == "0.4"
    assert memory.deprecated


def test_deducted_points_are_not_restored() -> None:
    memory = fresh(conf=0.7)
    decay(memory, T0)
    assert memory.confidence == 0.65
    reward_recall(memory, T0 + days(1))
    assert memory.confidence == 0.7


def test_recall_never_revives_but_reinforce_above_line_does() -> None:
    memory = fresh(conf=0.35)
    memory.deprecated = True
    reward_recall(memory, T0)
    assert memory.deprecated
    memory = fresh(conf=0.1)
    memory.deprecated = True
    reinforce(memory, T0)
    assert memory.deprecated and memory.confidence == 0.2
    memory = fresh(conf=0.35)
    memory.deprecated = True
    reinforce(memory, T0)
    assert not memory.deprecated and memory.confidence == 0.45


def test_gain_on_new_local_day_resets_the_cap() -> None:
    memory = fresh()
    apply_gain(memory, 0.1, T0)
    assert apply_gain(memory, 0.1, T0 + days(1)) == pytest.approx(0.1)
    assert memory.confidence == 0.7
