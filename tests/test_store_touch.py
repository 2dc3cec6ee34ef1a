"""A write reads only the files it changes: a rule write never reads ``project.jsonl`` (a restore
does search every group file's bytes for the id it brings back, without parsing them), and adding
a memory reads neither group file once the duplicate sidecar matches it (the page regeneration,
which reads everything, is left out here: it is not part of the store's write)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memself.store.memory_store as store_module
from memself.store.journal import Stamp
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, days, make_store, record, write_records


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = store_module.read_file

    def recording(path: Path) -> tuple[bytes, Stamp | None]:
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(store_module, "read_file", recording)
    return seen


def _seeded() -> MemoryStore:
    store = make_store()
    write_records(store, "rule", [record("r-1", "回答一律使用中文", 0.6)])
    write_records(
        store, "project", [record(f"p-{i}", f"项目事实第 {i} 条", 0.6, "project") for i in range(20)]
    )
    return store


def test_rule_writes_never_read_the_project_file(reads: list[str]) -> None:
    store = _seeded()
    added = store.add("提交前先跑测试", "rule", T0)
    store.reinforce("r-1", T0 + days(1))
    store.replace("r-1", "回答一律使用简体中文", T0 + days(1))
    store.delete([added.memory.id], T0 + days(1))
    assert "rule.jsonl" in reads
    assert "project.jsonl" not in reads
    assert {m.id for m in store.read_group("rule")} == {"r-1"}


def test_an_add_reads_no_group_file_once_the_sidecar_matches(reads: list[str]) -> None:
    store = _seeded()
    store.add("第一次追加的项目事实", "project", T0)  # builds the sidecar from a full read
    assert reads.count("project.jsonl") == 1
    reads.clear()
    second = store.add("第二次追加的项目事实", "project", T0)
    again = store.add("第二次追加的项目事实！", "project", T0 + days(1))
    assert [r for r in reads if r.endswith(".jsonl") and r != "trash.jsonl"] == ["project.jsonl"]
    assert again.duplicate and again.memory.id == second.memory.id  # only the twin's add read it
    assert len(store.read_group("project")) == 22
