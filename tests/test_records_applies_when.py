"""A memory's "applies when" requests: an extra field the original ignores and keeps, read
leniently from disk, checked on a write, absent from records that have none."""

from __future__ import annotations

import json

import pytest

from memself.errors import InvalidInput
from memself.store.records import MAX_APPLIES_WHEN, Memory, check_applies_when

BASE = {
    "id": "mem-1",
    "text": "所有存储的时间都用 UTC",
    "confidence": 0.6,
    "category": "rule",
    "evidence": "",
    "firstSeen": "2026-11-01T00:00:00.000Z",
    "lastSeen": "2026-11-01T00:00:00.000Z",
    "deprecated": False,
    "createdAt": "2026-11-01T00:00:00.000Z",
}


def test_a_record_without_the_field_round_trips_unchanged() -> None:
    memory = Memory.from_json(dict(BASE), "rule")
    assert memory is not None and memory.appliesWhen == ()
    assert json.dumps(memory.to_json()) == json.dumps(BASE)


def test_the_field_round_trips_and_is_cleaned_on_read() -> None:
    listed = ["保存快递员取件的时间", "保存快递员取件的时间", "a\nb\u2028c", 7, "x", "y" * 81]
    raw = dict(BASE, appliesWhen=listed)
    memory = Memory.from_json(raw, "rule")
    assert memory is not None
    assert memory.appliesWhen == ("保存快递员取件的时间", "a b c")
    assert memory.to_json()["appliesWhen"] == ["保存快递员取件的时间", "a b c"]
    assert "appliesWhen" not in memory.extra


def test_a_field_of_another_shape_is_dropped_not_the_memory() -> None:
    memory = Memory.from_json(dict(BASE, appliesWhen="保存取件时间"), "rule")
    assert memory is not None and memory.appliesWhen == ()


def test_a_write_takes_at_most_a_few_and_refuses_other_shapes() -> None:
    many = [f"第 {n} 个场景的请求" for n in range(10)]
    assert len(check_applies_when(many)) == MAX_APPLIES_WHEN
    assert check_applies_when(None) == ()
    for bad in ("一句话", [1, 2], {"a": "b"}):
        with pytest.raises(InvalidInput):
            check_applies_when(bad)
