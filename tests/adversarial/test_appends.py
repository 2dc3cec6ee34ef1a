"""Appended lines and their compaction: a new memory is one line at the end of its group file,
other writes rewrite only their lines, and the daily maintenance puts the file back in the
original's order. Several processes adding at once lose no line and tear none; a torn last line
(a writer killed mid-line) is moved aside by the next write, so it never pauses the maintenance;
a file out of order is read whole and what memself writes stays readable by the original's strict
reader; the exact-duplicate check holds whether its sidecar is fresh, stale or missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memself import doctor
from memself.maintenance import ran_today, run_daily_maintenance, run_or_start_daily_maintenance
from memself.store import dedupkeys, torntail
from memself.store.memory_store import MemoryStore, render_lines
from memself.store.records import sort_memories
from tests.support.helpers import T0, days, make_store, record, write_records
from tests.support.original_reader import original_reads

REPO_ROOT = Path(__file__).resolve().parents[2]


def _seed(store: MemoryStore, count: int) -> None:
    records = [
        record(f"s-{i:03d}", f"种子项目事实第 {i} 条，内容互不相同", 0.5 + i / 100, "project")
        for i in range(count)
    ]
    write_records(store, "project", records)


_ADDER = """
import sys
from datetime import datetime
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
worker, count, now = int(sys.argv[1]), int(sys.argv[2]), datetime.fromisoformat(sys.argv[3])
store = MemoryStore(DataPaths.default())
for k in range(count):
    added = store.add(f"进程 {worker} 追加的第 {k} 条项目事实", "project", now)
    assert not added.duplicate
    print(added.memory.id, flush=True)
"""


def test_processes_adding_at_once_lose_no_line_and_tear_none() -> None:
    store = make_store()
    _seed(store, 20)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _ADDER, str(w), "25", T0.isoformat()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env=os.environ.copy(),
        )
        for w in range(6)
    ]
    acked: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        acked += out.split()
    assert len(acked) == 6 * 25
    loaded = store.load_group("project")
    assert loaded.bad_lines == []
    ids = [m.id for m in loaded.memories]
    assert sorted(ids) == sorted({*acked, *(f"s-{i:03d}" for i in range(20))})
    raw = store.paths.group_file("project").read_bytes()
    assert raw.endswith(b"\n") and len(raw.splitlines()) == 20 + 6 * 25
    assert len(original_reads(store.paths.group_file("project"))) == 170


def test_out_of_order_file_reads_whole_and_compaction_restores_the_original_order() -> None:
    store = make_store()
    _seed(store, 10)
    added = store.add("后来追加的项目事实，置信度 0.5", "project", T0)
    store.reinforce("s-000", T0)  # rewritten in place: 0.6 now sits above lower ones
    store.delete(["s-005"], T0)
    path = store.paths.group_file("project")
    on_disk = [json.loads(line)["id"] for line in path.read_text("utf-8").splitlines()]
    assert on_disk[-1] == added.memory.id and on_disk[0] == "s-000"  # appended, edited in place
    read = store.read_group("project")
    assert [m.id for m in read] == [m.id for m in sort_memories(read)]
    assert {m.id for m in read} == {added.memory.id, *(f"s-{i:03d}" for i in range(10) if i != 5)}
    original_reads(path)

    run_daily_maintenance(store.paths, 30, T0)
    expected = render_lines(m.to_json() for m in sort_memories(store.load_group("project").memories))
    assert path.read_bytes() == expected
    original_reads(path)
    # The sidecar followed the compaction: it still matches the file.
    sidecar = dedupkeys.sidecar_path(store.paths, "project")
    assert dedupkeys.load(sidecar, store.load_group("project").stamp) is not None


def test_duplicate_check_holds_with_a_fresh_stale_or_missing_sidecar() -> None:
    store = make_store()
    _seed(store, 5)
    first = store.add("灰度开关在 Apollo 的 pay.gray 命名空间", "project", T0)
    again = store.add("灰度开关在 Apollo 的 pay.gray 命名空间。", "project", T0 + days(1))
    assert again.duplicate and again.memory.id == first.memory.id
    # The original appends a line itself: the sidecar no longer matches, the check still holds.
    path = store.paths.group_file("project")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(
            json.dumps(record("orig-1", "原插件追加的一条项目事实", 0.6, "project"), ensure_ascii=False)
            + "\n"
        )
    assert store.add("原插件追加的一条项目事实！", "project", T0 + days(2)).memory.id == "orig-1"
    dedupkeys.sidecar_path(store.paths, "project").unlink()
    assert store.add("原插件追加的一条项目事实", "project", T0 + days(3)).memory.id == "orig-1"
    # A deleted memory's key may stay in the sidecar: the full check decides, nothing is lost.
    store.delete(["orig-1"], T0 + days(3))
    revived = store.add("原插件追加的一条项目事实", "project", T0 + days(3))
    assert not revived.duplicate and revived.trashed_twin is not None
    ids = [m.id for m in store.read_group("project")]
    assert len(ids) == len(set(ids)) == 7


TORN = b'{"id":"torn-1","text":"\xe5\x86\x99\xe5\x88\xb0\xe4\xb8\x80\xe5\x8d\x8a'


def _tear(path: Path, data: bytes = TORN) -> None:
    """What a writer killed inside its ``write`` leaves: part of a line and no newline (the kernel
    stops a write to a file at a page boundary once SIGKILL is pending)."""
    with open(path, "ab") as handle:
        handle.write(data)


def test_a_torn_last_line_is_moved_aside_by_the_next_write() -> None:
    store = make_store()
    _seed(store, 3)
    path = store.paths.group_file("project")
    _tear(path)
    added = store.add("被截断的行之后追加的项目事实", "project", T0)
    loaded = store.load_group("project")
    assert loaded.bad_lines == []
    assert added.memory.id in {m.id for m in loaded.memories} and len(loaded.memories) == 4
    assert path.read_bytes().endswith(b"\n") and TORN not in path.read_bytes()
    # Kept byte for byte beside the store, never dropped, and doctor says where.
    assert store.paths.torn_lines.read_bytes() == TORN + b"\n"
    check = doctor.check_data(store.paths)
    assert check.ok and "1 行被中断的写入残行" in check.summary and "torn-lines.txt" in check.summary


def test_a_torn_last_line_does_not_pause_the_daily_maintenance() -> None:
    store = make_store()
    write_records(store, "rule", [record("idle", "三十天没用的规则", 0.7, last=T0 - days(30))])
    _tear(store.paths.group_file("rule"))
    _tear(store.paths.trash, b'{"id":"gone","text":"\xe5\x88')
    result = run_daily_maintenance(store.paths, 30, T0)
    assert result is not None and result.decayed == 1
    assert store.quarantined() == []
    assert store.paths.torn_lines.read_bytes() == TORN + b"\n" + b'{"id":"gone","text":"\xe5\x88\n'


def test_every_cut_of_a_stored_line_is_taken_for_torn_and_no_hand_edit_mistake_is() -> None:
    store = make_store()
    full = render_lines(
        [dict(record("m-1", "支付页灰度开关是 pay_new_flow，默认关闭", 0.55, "project"), n=-12.5e-3)]
    )
    assert full.endswith(b"\n")
    for cut in range(1, len(full) - 1):  # the line without its newline is a whole record
        assert torntail._cut_short(full[:cut]), full[:cut]
    mistakes = [
        b'{"id":"a","text":"b",}',  # a stray comma
        b'{"id":"a" "text":"b"}',
        b'{"id":"a","text":"b","c":tru}',
        b'{"id":"a","text":"b\xff"}',  # a byte that is not UTF-8, inside the line
        b'{"id":"a"}',  # whole JSON, not a usable record: quarantined as before
        b"not json at all",
    ]
    for line in mistakes:
        assert not torntail._cut_short(line), line
    # Such a last line stays where it is, quarantined and named, and the next add goes after it.
    path = store.paths.group_file("project")
    path.write_bytes(full + mistakes[0])
    store.add("手改出错之后追加的项目事实", "project", T0)
    assert [b.raw for b in store.load_group("project").bad_lines] == [mistakes[0]]
    assert not store.paths.torn_lines.exists()


def test_a_torn_line_stays_when_torn_lines_cannot_be_written_and_the_write_goes_on() -> None:
    store = make_store()
    _seed(store, 2)
    store.paths.torn_lines.symlink_to(store.paths.torn_lines)  # a loop: nothing can be written there
    _tear(store.paths.group_file("project"))
    added = store.add("写不了残行文件时追加的项目事实", "project", T0)
    assert added.memory.id in {m.id for m in store.load_group("project").memories}
    assert [b.raw for b in store.load_group("project").bad_lines] == [TORN]


def test_a_whole_last_record_without_its_newline_is_kept_in_place() -> None:
    # A hand edit that dropped the final newline is a memory, not a torn write.
    store = make_store()
    _seed(store, 2)
    path = store.paths.group_file("project")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    store.add("手改文件之后追加的项目事实", "project", T0)
    loaded = store.load_group("project")
    assert loaded.bad_lines == [] and len(loaded.memories) == 3
    assert not store.paths.torn_lines.exists()


def test_store_files_with_nothing_torn_are_only_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # A store file memself may not write (a read-only trash) must not log a kept torn line on
    # every write when nothing in it is torn: the check reads, and writes only a torn tail.
    store = make_store()
    _seed(store, 2)
    store.add("垃圾箱里的规则", "rule", T0)
    store.delete([store.read_group("rule")[0].id], T0)
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], flags: int, *args: int, **kw: int) -> int:
        opened.append((Path(path).name, flags))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(torntail.os, "open", spy)
    assert torntail.move_torn_tails(store.paths) == 0
    names = {store.paths.group_file(g).name for g in ("rule", "project")} | {store.paths.trash.name}
    assert {n for n, _ in opened} == names
    assert all(flags & (os.O_WRONLY | os.O_RDWR) == 0 for _, flags in opened), opened
    _tear(store.paths.trash, b'{"id":"gone","text":"\xe5\x88')
    assert torntail.move_torn_tails(store.paths) == 1
    assert store.paths.torn_lines.read_bytes() == b'{"id":"gone","text":"\xe5\x88\n'


def test_a_large_store_maintenance_runs_detached_and_finishes() -> None:
    store = make_store()
    write_records(
        store,
        "project",
        [
            record(f"old-{i}", f"很久没用的项目事实第 {i} 条", 0.8, "project", last=T0 - days(40))
            for i in range(30)
        ],
    )
    store.add("刚追加的项目事实，不会衰减", "project", T0)
    # Every store counts as large here: the session start only starts the run and waits for it.
    assert run_or_start_daily_maintenance(store.paths, 30, T0, wait_s=120, inline_bytes=0)
    assert ran_today(store.paths, T0)
    memories = store.load_group("project").memories
    assert [m.id for m in memories] == [m.id for m in sort_memories(memories)]
    assert sum(m.id.startswith("old-") and m.confidence < 0.8 for m in memories) == 30
    # Done for the day: nothing is started again.
    assert run_or_start_daily_maintenance(store.paths, 30, T0, wait_s=0, inline_bytes=0)
