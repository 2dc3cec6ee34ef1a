"""Multi-file writes: the intent record is the commit point; readers and writers replay it."""

from __future__ import annotations

import json
import os

import pytest

from memself.atomic import stage
from memself.errors import LockLost
from memself.paths import DataPaths
from memself.store import journal
from memself.store.memory_store import MemoryStore, render_lines
from tests.support.helpers import T0, make_store, record, write_records


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def _committed_but_not_applied(paths: DataPaths, rule: bytes, trash: bytes) -> None:
    """What a writer killed right after its commit point leaves: staged files and an intent."""
    moves = []
    for path, data in ((paths.group_file("rule"), rule), (paths.trash, trash)):
        src, target = stage(path, data)
        base = journal.file_stamp(target)
        moves.append({"staged": str(src), "target": str(target), "base": list(base) if base else None})
    journal.intent_path(paths).write_text(json.dumps({"version": 1, "moves": moves}))


def test_a_reader_replays_a_committed_move(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5), record("b", "注释用中文", 0.5)])
    moved = store.load_group("rule").memories[1].to_json()
    _committed_but_not_applied(
        store.paths,
        render_lines([record("a", "回答使用中文", 0.5)]),
        render_lines([{**moved, "deletedAt": "x", "deleteReason": "y"}]),
    )
    assert [m.id for m in store.read_group("rule")] == ["a"]
    assert [e.memory.id for e in store.trash_entries()] == ["b"]
    assert not journal.intent_path(store.paths).exists()
    assert not [p for p in store.paths.root.iterdir() if ".tmp." in p.name]


def test_a_writer_replays_before_it_reads(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5), record("b", "注释用中文", 0.5)])
    _committed_but_not_applied(
        store.paths,
        render_lines([record("a", "回答使用中文", 0.5)]),
        render_lines([record("b", "注释用中文", 0.5)]),
    )
    created = store.create("新的一条规则内容", "rule", T0)
    assert {m.id for m in store.read_group("rule")} == {"a", created.id}
    assert [e.memory.id for e in store.trash_entries()] == ["b"]


def test_a_target_changed_since_the_commit_point_is_not_overwritten(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5)])
    _committed_but_not_applied(
        store.paths, render_lines([]), render_lines([record("a", "回答使用中文", 0.5)])
    )
    # Another program (the original plugin) rewrote the group file after the crash.
    write_records(store, "rule", [record("a", "回答使用中文", 0.5), record("n", "原插件新增的规则", 0.5)])
    assert {m.id for m in store.read_group("rule")} == {"a", "n"}
    # Worst case is a memory in two files, never one in none.
    assert [e.memory.id for e in store.trash_entries()] == ["a"]


def test_an_intent_naming_other_files_is_refused(store: MemoryStore, tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    src = tmp_path / ".victim.txt.tmp.1.x"
    src.write_text("overwritten")
    journal.intent_path(store.paths).write_text(
        json.dumps({"version": 1, "moves": [{"staged": str(src), "target": str(victim), "base": None}]})
    )
    store.read_group("rule")
    assert victim.read_text() == "keep me"
    assert "intent-move-refused" in store.paths.log_file.read_text()


def test_an_unreadable_intent_is_set_aside(store: MemoryStore) -> None:
    journal.intent_path(store.paths).write_text("{half")
    store.create("新的一条规则内容", "rule", T0)
    assert not journal.intent_path(store.paths).exists()
    assert [p.name for p in store.paths.root.iterdir() if p.name.startswith(".memory-write.intent.bad-")]


def test_a_file_changed_under_the_lock_fails_the_write_and_writes_nothing(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5)])
    with pytest.raises(LockLost, match="没有写入任何文件"):
        with store._writing(T0) as session:
            session.require("a").text = "被改掉的正文内容"
            session.touch(session.require("a"))
            # Another program appends in place, as the original plugin adds a memory.
            with open(store.paths.group_file("rule"), "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record("n", "原插件新增的规则", 0.5)) + "\n")
    assert {m.id: m.text for m in store.read_group("rule")} == {"a": "回答使用中文", "n": "原插件新增的规则"}


def test_a_lock_taken_away_fails_the_write(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5)])
    before = store.paths.group_file("rule").read_bytes()
    with pytest.raises(LockLost, match="其他程序"):
        with store._writing(T0) as session:
            session.touch(session.require("a"))
            for name in os.listdir(store.paths.lock_dir):
                os.unlink(store.paths.lock_dir / name)
    assert store.paths.group_file("rule").read_bytes() == before
