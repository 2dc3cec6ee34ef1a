"""Daily maintenance: decay once, deprecation at 0.4, clamping, trash purge, strict reads, retries."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest

from memself import maintenance
from memself.errors import CorruptFile
from memself.maintenance import ran_today, run_daily_maintenance
from memself.store.memory_store import MemoryStore
from memself.timeutil import iso
from tests.support.helpers import T0, by_id, days, make_store, record, write_records


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def test_due_exactly_at_decay_days_and_not_a_millisecond_before(store: MemoryStore) -> None:
    write_records(
        store,
        "rule",
        [
            record("due", "三十天没用的规则", 0.7, last=T0 - days(30)),
            record("early", "差一毫秒的规则", 0.7, last=T0 - days(30) + timedelta(milliseconds=1)),
        ],
    )
    result = run_daily_maintenance(store.paths, 30, T0)
    assert result is not None and result.decayed == 1
    assert by_id(store, "due").confidence == 0.65 and by_id(store, "due").lastSeen == iso(T0)
    early = by_id(store, "early")
    assert early.confidence == 0.7 and early.lastSeen != iso(T0)
    state = json.loads(store.paths.decay_state.read_text())
    assert state["lastRunAt"] == iso(T0) and state["lastRunDate"] == "2026-11-02"


def test_180_idle_days_deduct_once(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(180))])
    run_daily_maintenance(store.paths, 30, T0)
    assert by_id(store, "a").confidence == 0.85


def test_decay_days_setting_is_respected(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "一周没用的规则", 0.9, last=T0 - days(7))])
    run_daily_maintenance(store.paths, 7, T0)
    assert by_id(store, "a").confidence == 0.85


def test_new_memory_fades_at_day_30_and_60_then_stays(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "从没用过的新规则", 0.5, last=T0, created=T0)])
    run_daily_maintenance(store.paths, 30, T0 + days(30))
    assert by_id(store, "a").confidence == 0.45 and not by_id(store, "a").deprecated
    run_daily_maintenance(store.paths, 30, T0 + days(60))
    memory = by_id(store, "a")
    assert memory.confidence == 0.4 and memory.deprecated
    before = store.paths.group_file("rule").read_bytes()
    run_daily_maintenance(store.paths, 30, T0 + days(200))
    assert store.paths.group_file("rule").read_bytes() == before


def test_one_run_per_local_day(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    assert run_daily_maintenance(store.paths, 30, T0) is not None
    assert run_daily_maintenance(store.paths, 30, T0 + timedelta(hours=1)) is None
    assert ran_today(store.paths, T0 + timedelta(hours=2))
    assert not ran_today(store.paths, T0 + days(1))


def test_legacy_clamp_and_below_line_marked(store: MemoryStore) -> None:
    write_records(
        store,
        "rule",
        [
            record("big", "旧版置信度很高的规则", 1.15, last=T0, observations=20),
            record("low", "旧版低置信度规则", 0.38, last=T0),
        ],
    )
    result = run_daily_maintenance(store.paths, 30, T0)
    assert result.clamped == 2
    assert by_id(store, "big").confidence == 1
    assert by_id(store, "low").deprecated
    assert "observations" not in store.paths.group_file("rule").read_text()


def test_trash_older_than_30_days_is_purged(store: MemoryStore) -> None:
    old = store.create("很早删除的规则内容", "rule", T0 - days(40))
    new = store.create("最近删除的规则内容", "rule", T0 - days(40))
    store.delete([old.id], T0 - days(31))
    store.delete([new.id], T0 - days(2))
    result = run_daily_maintenance(store.paths, 30, T0)
    assert result.trash_purged == 1
    assert [e.memory.id for e in store.trash_entries()] == [new.id]


@pytest.mark.parametrize("bad", ["{invalid}", "{}", "null", '{"text":12}'])
def test_corrupt_line_makes_maintenance_refuse(store: MemoryStore, bad: str) -> None:
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    path = store.paths.group_file("rule")
    path.write_text(path.read_text() + bad + "\n")
    before = path.read_bytes()
    with pytest.raises(CorruptFile, match="每日维护未改动任何文件"):
        run_daily_maintenance(store.paths, 30, T0)
    assert path.read_bytes() == before
    assert not store.paths.decay_state.exists()


def test_corrupt_state_file_reruns_without_double_deduction(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    run_daily_maintenance(store.paths, 30, T0)
    store.paths.decay_state.write_text("{not json")
    assert run_daily_maintenance(store.paths, 30, T0 + timedelta(hours=1)) is not None
    assert by_id(store, "a").confidence == 0.85


def test_failed_write_does_not_mark_day_and_retry_does_not_double_deduct(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_records(store, "rule", [record("r", "很久没用的规则", 0.9, last=T0 - days(40))])
    write_records(
        store, "project", [record("p", "很久没用的项目事实", 0.9, group="project", last=T0 - days(40))]
    )
    real_write = maintenance.write_atomic

    def failing(path, data, mode=0o600):  # a full disk on the second file, which we cannot cause here
        if path.name == "project.jsonl":
            raise OSError(28, "No space left on device")
        real_write(path, data, mode)

    monkeypatch.setattr(maintenance, "write_atomic", failing)
    with pytest.raises(OSError):
        run_daily_maintenance(store.paths, 30, T0)
    assert not store.paths.decay_state.exists()
    assert by_id(store, "r").confidence == 0.85
    monkeypatch.setattr(maintenance, "write_atomic", real_write)
    run_daily_maintenance(store.paths, 30, T0 + timedelta(minutes=5))
    assert by_id(store, "r").confidence == 0.85  # not deducted twice
    assert by_id(store, "p").confidence == 0.85
    assert ran_today(store.paths, T0)


def test_deprecated_memories_are_never_decayed_or_deleted(store: MemoryStore) -> None:
    write_records(store, "rule", [record("d", "已经废弃的规则", 0.3, last=T0 - days(400), deprecated=True)])
    run_daily_maintenance(store.paths, 30, T0)
    memory = by_id(store, "d")
    assert memory.confidence == 0.3 and memory.deprecated


_RACE = """
import sys
from datetime import datetime, timezone
from memself.paths import DataPaths
from memself.maintenance import run_daily_maintenance
now = datetime.fromisoformat(sys.argv[1])
result = run_daily_maintenance(DataPaths.default(), 30, now)
print("RAN" if result is not None else "SKIP")
"""


def test_five_concurrent_session_starts_run_maintenance_once(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    procs = [
        subprocess.Popen([sys.executable, "-c", _RACE, T0.isoformat()], stdout=subprocess.PIPE, text=True)
        for _ in range(5)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(outputs) == ["RAN", "SKIP", "SKIP", "SKIP", "SKIP"]
    assert by_id(store, "a").confidence == 0.85
    log = store.paths.log_file.read_text()
    assert log.count("每日衰减完成") == 1
