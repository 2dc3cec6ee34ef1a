"""The exact-duplicate sidecar after another program changed a group file.

Another process appending lines (the original plugin, another client) is the common change: the
sidecar then takes only the appended lines. Anything else (a line rewritten in the middle, same
length or not, a truncated file) makes the store parse the whole file again, and in every case a
twin the file holds is still found. Which path ran is read from the store's log (how many lines
it parsed), never from timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.store import dedupkeys
from memself.store.memory_store import MemoryStore, WriteSession
from tests.support.helpers import T0, by_id, days, make_store, record, write_records

# Enough lines that the file spans several of the sidecar's digest blocks.
SEED = 800


def _seed(store: MemoryStore) -> Path:
    records = [
        record(f"s-{i:04d}", f"种子项目事实第 {i:04d} 条，内容互不相同，长度也差不多", 0.5, "project")
        for i in range(SEED)
    ]
    write_records(store, "project", records)
    # A first add writes the sidecar for the file as it is then.
    store.add("让 sidecar 写出来的第一条项目事实", "project", T0)
    sidecar = dedupkeys.sidecar_path(store.paths, "project")
    assert dedupkeys.load(sidecar, store.load_group("project").stamp) is not None
    path = store.paths.group_file("project")
    assert path.stat().st_size > 2 * dedupkeys.BLOCK
    return path


def _outside_append(path: Path, *records: dict) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for one in records:
            handle.write(json.dumps(one, ensure_ascii=False) + "\n")


def _sidecar_events(store: MemoryStore) -> list[tuple[str, int]]:
    """(event, lines parsed) of every sidecar catch-up or rebuild the store logged, in order."""
    out: list[tuple[str, int]] = []
    log = store.paths.log_file
    for line in log.read_text("utf-8").splitlines() if log.exists() else []:
        for event in ("dedup-keys-caught-up", "dedup-keys-rebuilt"):
            if f" {event} " in line:
                fields = json.loads(line.split(f" {event} ", 1)[1])
                assert fields["group"] == "project"
                out.append((event, fields["lines"]))
    return out


def test_an_outside_append_is_taken_line_by_line_and_its_duplicate_still_caught() -> None:
    store = make_store()
    path = _seed(store)
    before = _sidecar_events(store)
    _outside_append(
        path,
        record("out-1", "另一个进程追加的项目事实甲", 0.6, "project"),
        record("out-2", "另一个进程追加的项目事实乙", 0.6, "project"),
    )
    again = store.add("另一个进程追加的项目事实乙。", "project", T0 + days(1))
    assert again.duplicate and again.memory.id == "out-2"
    # Only the two appended lines were parsed for the sidecar, not the whole file.
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-caught-up", 2)]

    # The sidecar written after the catch-up matches the file and still knows every key: a
    # second outside append, a duplicate of the first, of a seed line and of the new line.
    _outside_append(path, record("out-3", "第三条外部追加的项目事实", 0.6, "project"))
    assert store.add("第三条外部追加的项目事实", "project", T0 + days(2)).memory.id == "out-3"
    assert store.add("另一个进程追加的项目事实甲", "project", T0 + days(2)).memory.id == "out-1"
    seed = "种子项目事实第 0007 条，内容互不相同，长度也差不多"
    assert store.add(seed, "project", T0 + days(2)).memory.id == "s-0007"
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-caught-up", 2), ("dedup-keys-caught-up", 1)]
    ids = [m.id for m in store.read_group("project")]
    assert len(ids) == len(set(ids)) == SEED + 4


def test_a_torn_line_moved_aside_and_written_again_keeps_the_sidecar_right() -> None:
    store = make_store()
    path = _seed(store)
    before = _sidecar_events(store)
    whole = record("torn-1", "写到一半又被重新写完的项目事实", 0.6, "project")
    head = json.dumps(whole, ensure_ascii=False).encode()[:40]
    with open(path, "ab") as handle:  # a writer killed inside its write
        handle.write(head)
    # The next write moves the torn start aside: the new fact is not a twin of it.
    added = store.add("截断之后追加的一条项目事实", "project", T0 + days(1))
    assert not added.duplicate and head not in path.read_bytes()
    # The other program writes its line again, whole, after ours: the file only grew.
    _outside_append(path, whole)
    assert store.add("写到一半又被重新写完的项目事实", "project", T0 + days(2)).memory.id == "torn-1"
    # Cut back to the bytes the sidecar had seen, then one whole line more: no full parse.
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-caught-up", 0), ("dedup-keys-caught-up", 1)]


def test_a_rewrite_in_the_middle_of_the_same_length_rebuilds_and_finds_the_twin() -> None:
    store = make_store()
    path = _seed(store)
    before = _sidecar_events(store)
    data = path.read_bytes()
    old = "种子项目事实第 0400 条".encode()
    new = "改写项目事实第 0400 条".encode()
    assert len(old) == len(new) and data.count(old) == 1
    # Rewritten in place, same length, and a line appended: the file only grew, yet its middle changed.
    path.write_bytes(data.replace(old, new))
    _outside_append(path, record("out-1", "改写的同时追加的项目事实", 0.6, "project"))
    twin = store.add("改写项目事实第 0400 条，内容互不相同，长度也差不多", "project", T0 + days(1))
    assert twin.duplicate and twin.memory.id == "s-0400"
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-rebuilt", SEED + 2)]
    assert store.add("改写的同时追加的项目事实", "project", T0 + days(1)).memory.id == "out-1"


def test_a_rewrite_in_the_middle_of_another_length_rebuilds_and_finds_the_twin() -> None:
    store = make_store()
    path = _seed(store)
    before = _sidecar_events(store)
    data = path.read_bytes()
    old = "种子项目事实第 0123 条".encode()
    new = "被另一个程序改写得更长的项目事实第 0123 条".encode()
    path.write_bytes(data.replace(old, new))
    twin = store.add(
        "被另一个程序改写得更长的项目事实第 0123 条，内容互不相同，长度也差不多", "project", T0 + days(1)
    )
    assert twin.duplicate and twin.memory.id == "s-0123"
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-rebuilt", SEED + 1)]


def test_a_truncated_file_rebuilds_and_still_finds_twins() -> None:
    store = make_store()
    path = _seed(store)
    before = _sidecar_events(store)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:500]))
    seed = "种子项目事实第 0499 条，内容互不相同，长度也差不多"
    assert store.add(seed, "project", T0 + days(1)).memory.id == "s-0499"
    cut = store.add("种子项目事实第 0600 条，内容互不相同，长度也差不多", "project", T0 + days(1))
    assert not cut.duplicate
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-rebuilt", 500)]


def test_a_sidecar_carried_through_rewrites_still_takes_only_an_outside_append() -> None:
    store = make_store()
    path = _seed(store)
    # Rewrites of this store (a line changed near the start, a line removed) move the sidecar along.
    store.reinforce("s-0003", T0 + days(1))
    store.delete(["s-0500"], T0 + days(1))
    before = _sidecar_events(store)
    _outside_append(path, record("out-1", "改写之后外部追加的项目事实", 0.6, "project"))
    assert store.add("改写之后外部追加的项目事实", "project", T0 + days(2)).memory.id == "out-1"
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-caught-up", 1)]


def _no_full_parse(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every whole-file parse of a write session (the duplicate check's slow path)."""
    calls: list[str] = []
    real = WriteSession.parsed

    def parsed(self: WriteSession, group: str) -> object:
        calls.append(group)
        return real(self, group)

    monkeypatch.setattr(WriteSession, "parsed", parsed)
    return calls


def test_a_twin_is_found_by_its_recorded_id_without_parsing_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    _seed(store)
    calls = _no_full_parse(monkeypatch)
    twin = store.add("种子项目事实第 0400 条：内容互不相同，长度也差不多！", "project", T0 + days(1))
    assert twin.duplicate and twin.memory.id == "s-0400" and twin.memory.confidence == 0.6
    assert calls == []
    assert by_id(store, "s-0400").confidence == 0.6  # the reinforce was written to its line


def test_a_memory_rewarded_every_day_records_its_pair_once() -> None:
    store = make_store()
    _seed(store)
    sidecar = dedupkeys.sidecar_path(store.paths, "project")
    before = sidecar.stat().st_size
    for day in range(1, 6):
        assert store.add(
            "种子项目事实第 0007 条，内容互不相同，长度也差不多", "project", T0 + days(day)
        ).duplicate
    assert sidecar.read_bytes().count(b'"s-0007"') == 1
    assert sidecar.stat().st_size - before < 200  # the digests of the changed blocks, nothing more


def test_a_stale_recorded_id_falls_back_to_the_full_check(monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    _seed(store)
    # s-0012 gets another text: its old key stays recorded with its id, which is no twin any more.
    store.replace("s-0012", "改过的第十二条项目事实", T0 + days(1))
    calls = _no_full_parse(monkeypatch)
    fresh = store.add("种子项目事实第 0012 条，内容互不相同，长度也差不多", "project", T0 + days(2))
    assert not fresh.duplicate and calls == ["project"]
    # And a hand edit gave a second line the same text: the full check finds it.
    path = store.paths.group_file("project")
    _outside_append(path, record("hand-1", "手工加的一条项目事实", 0.6, "project"))
    assert store.add("手工加的一条项目事实", "project", T0 + days(3)).memory.id == "hand-1"


def test_an_older_or_damaged_sidecar_is_rebuilt_or_skipped_and_twins_still_found() -> None:
    store = make_store()
    path = _seed(store)
    sidecar = dedupkeys.sidecar_path(store.paths, "project")
    # The format before ids: rebuilt from the file.
    sidecar.write_bytes(sidecar.read_bytes().replace(b"memself-dedup-keys 3", b"memself-dedup-keys 2", 1))
    before = _sidecar_events(store)
    assert store.add("种子项目事实第 0100 条，内容互不相同，长度也差不多", "project", T0 + days(1)).duplicate
    assert _sidecar_events(store)[len(before) :] == [("dedup-keys-rebuilt", SEED + 1)]
    # A damaged pair line names no candidate; the twin is still found.
    data = sidecar.read_bytes()
    key = data[data.index(b' "s-0200"') - 16 : data.index(b' "s-0200"')]
    sidecar.write_bytes(data.replace(key + b' "s-0200"', key + b' "s-02'))
    assert dedupkeys.read(sidecar) is not None
    assert (
        store.add("种子项目事实第 0200 条，内容互不相同，长度也差不多", "project", T0 + days(2)).memory.id
        == "s-0200"
    )
    assert path.read_bytes().count(b'"id":"s-0200"') == 1


@pytest.mark.parametrize("known", [3, 12])  # one search each; one set of the recorded pairs
def test_pairs_already_recorded_are_not_recorded_again(known: int) -> None:
    pairs = [(dedupkeys.key_hash(f"键{i}", ""), f"m-{i}") for i in range(40)]
    sidecar = dedupkeys.for_pairs(pairs, 0, [])
    again = [*pairs[:known], (pairs[0][0], "m-other"), (dedupkeys.key_hash("新键", ""), "m-new")]
    sidecar.add(again)
    assert sidecar.pairs.count(b"\n") - 1 == 42
    assert sidecar.ids_for([pairs[0][0]]) == {"m-0", "m-other"}
    assert sidecar.ids_for([dedupkeys.key_hash("新键", "")]) == {"m-new"}


def test_the_daily_maintenance_drops_the_pairs_of_deleted_memories() -> None:
    from memself.maintenance import run_daily_maintenance

    store = make_store()
    records = [
        record(f"d-{i:02d}", f"会被删掉一半的项目事实 {i:02d}", 0.7, "project", last=T0 - days(40))
        for i in range(40)
    ]
    write_records(store, "project", records)
    store.add("写出 sidecar 的一条项目事实", "project", T0)
    store.delete([f"d-{i:02d}" for i in range(20)], T0)
    sidecar = dedupkeys.sidecar_path(store.paths, "project")
    assert dedupkeys.read(sidecar)[1].pairs.count(b"\n") - 1 == 41  # the deleted ones' pairs stay
    result = run_daily_maintenance(store.paths, 30, T0 + days(1))
    assert result is not None and result.decayed == 20  # the group file was rewritten
    found = dedupkeys.load(sidecar, store.load_group("project").stamp)
    assert found is not None and found.pairs.count(b"\n") - 1 == 21
    assert store.add("会被删掉一半的项目事实 30", "project", T0 + days(2)).memory.id == "d-30"
