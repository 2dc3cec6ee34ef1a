"""Store operations: create, reinforce, merge, replace, delete/trash/restore, rewards, bad input."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from memself.errors import InvalidInput, NotFound
from memself.store.memory_store import MemoryStore
from memself.store.records import Memory
from tests.support.helpers import T0, by_id, days, make_store, record, write_records


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def test_data_dir_is_created_private(store: MemoryStore) -> None:
    store.create("回答一律使用中文", "rule", T0)
    assert stat.S_IMODE(os.stat(store.paths.root).st_mode) == 0o700


@pytest.mark.parametrize("text", ["", "  短  ", "12345", "x" * 401, " " * 10])
def test_text_outside_6_to_400_is_refused(store: MemoryStore, text: str) -> None:
    with pytest.raises(InvalidInput, match="6 到 400"):
        store.create(text, "rule", T0)
    assert not store.paths.group_file("rule").exists()


def test_text_is_trimmed_and_limits_inclusive(store: MemoryStore) -> None:
    assert store.create("  123456  ", "rule", T0).text == "123456"
    assert len(store.create("字" * 400, "project", T0).text) == 400


def test_create_writes_original_format(store: MemoryStore) -> None:
    memory = store.create("改完代码不要自动 commit", "rule", T0, evidence="cli")
    line = store.paths.group_file("rule").read_text("utf-8").splitlines()[0]
    raw = json.loads(line)
    assert list(raw)[:9] == [
        "id",
        "text",
        "confidence",
        "category",
        "evidence",
        "firstSeen",
        "lastSeen",
        "deprecated",
        "createdAt",
    ]
    assert raw["confidence"] == 0.5 and raw["createdAt"] == "2026-11-02T12:00:00.000Z"
    assert memory.id.startswith("mem-") and len(memory.id.split("-")[2]) == 6


def test_unknown_group_is_refused(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="rule 或 project"):
        store.create("回答一律使用中文", "misc", T0)


def test_reinforce_merge_replace(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5)])
    assert store.reinforce("a", T0).gain == pytest.approx(0.1)
    change = store.merge_into("a", "回答和注释都使用中文", T0 + days(1))
    assert change.previous_text == "回答使用中文"
    assert by_id(store, "a").confidence == 0.7 and by_id(store, "a").text == "回答和注释都使用中文"
    # A merge on a day already at the cap still replaces the text but adds nothing.
    change = store.merge_into("a", "回答、注释和提交信息都使用中文", T0 + days(1))
    assert change.gain == 0 and by_id(store, "a").confidence == 0.7
    store.replace("a", "只用中文回答", T0 + days(2))
    assert by_id(store, "a").confidence == 0.7 and by_id(store, "a").text == "只用中文回答"


def test_merge_pair_keeps_higher_confidence_and_trashes_the_other(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5), record("b", "注释用中文", 0.8)])
    store.merge_pair("a", "b", "回答和注释都使用中文", T0)
    assert by_id(store, "a").confidence == 0.8
    assert store.get("b") is None
    assert [e.memory.id for e in store.trash_entries()] == ["b"]


def test_applies_when_on_create_merge_replace_and_merge_pair(store: MemoryStore) -> None:
    a = store.create("回答使用中文", "rule", T0, applies_when=["解释一下报错", "写个 README"])
    assert by_id(store, a.id).appliesWhen == ("解释一下报错", "写个 README")
    with pytest.raises(InvalidInput, match="appliesWhen"):
        store.create("回答使用中文", "rule", T0, applies_when="解释一下报错")  # type: ignore[arg-type]
    # No new requests: the old ones described the old text and go (the filler asks for new ones).
    store.merge_into(a.id, "回答和注释都使用中文", T0 + days(1))
    assert by_id(store, a.id).appliesWhen == ()
    store.replace(a.id, "回答和注释都使用中文", T0 + days(1))  # the same text: nothing to drop
    store.replace(a.id, "只用中文回答和写注释", T0 + days(2), applies_when=["给函数加注释"])
    assert by_id(store, a.id).appliesWhen == ("给函数加注释",)
    store.replace(a.id, "只用中文回答和写注释", T0 + days(2))
    assert by_id(store, a.id).appliesWhen == ("给函数加注释",)
    b = store.create(
        "提交信息用中文写", "rule", T0, applies_when=["提交一下", "给函数加注释", "写个提交说明"]
    )
    store.merge_pair(a.id, b.id, "回答、注释和提交信息都使用中文", T0 + days(3))
    assert by_id(store, a.id).appliesWhen == ("给函数加注释", "提交一下", "写个提交说明")


def test_delete_trash_restore_round_trip(store: MemoryStore) -> None:
    keep = store.create("回答一律使用中文", "rule", T0)
    gone = store.create("支付页灰度开关是 pay_new_flow", "project", T0)
    removed = store.delete([gone.id, "mem-missing"], T0 + days(1))
    assert [m.id for m in removed] == [gone.id]
    assert store.get(gone.id) is None and store.get(keep.id) is not None
    entries = store.trash_entries()
    assert entries[0].memory.text == gone.text and entries[0].deleted_at.startswith("2026-11-03")
    restored = store.restore(gone.id, T0 + days(2))
    assert restored.category == "project" and store.get(gone.id).confidence == 0.5
    assert store.trash_entries() == []


def test_delete_of_only_unknown_ids_is_an_error(store: MemoryStore) -> None:
    with pytest.raises(NotFound):
        store.delete(["mem-x"], T0)
    with pytest.raises(NotFound):
        store.restore("mem-x", T0)
    with pytest.raises(NotFound):
        store.reinforce("mem-x", T0)


def test_batch_recall_reward(store: MemoryStore) -> None:
    write_records(
        store, "rule", [record("a", "回答使用中文", 0.5), record("d", "已废弃的规则", 0.3, deprecated=True)]
    )
    write_records(store, "project", [record("p", "支付灰度开关 pay_new_flow", 0.5, group="project")])
    gains = store.reward_recall(["a", "a", "p", "missing", "d"], T0)
    assert gains == {"a": pytest.approx(0.05), "p": pytest.approx(0.05)}
    assert by_id(store, "p").lastSeen.startswith("2026-11-02T12")
    assert by_id(store, "d").confidence == 0.3
    assert store.reward_recall([], T0) == {}


def test_reward_already_given_today_takes_no_lock_and_writes_nothing(store: MemoryStore) -> None:
    write_records(store, "rule", [record("a", "回答使用中文", 0.5)])
    store.reward_recall(["a"], T0)
    before = store.paths.group_file("rule").stat().st_mtime_ns
    store.paths.lock_dir.mkdir()  # a held lock: taking it would block and fail
    (store.paths.lock_dir / f"owner-{os.getpid()}-x").touch()
    assert store.reward_recall(["a"], T0 + days(0.1)) == {}
    assert store.paths.group_file("rule").stat().st_mtime_ns == before


def test_corrupt_line_is_skipped_reported_and_kept(store: MemoryStore) -> None:
    path = store.paths.group_file("rule")
    path.write_text(json.dumps(record("a", "回答使用中文", 0.5)) + "\n{broken\n\n", "utf-8")
    assert [m.id for m in store.read_group("rule")] == ["a"]
    assert store.load_group("rule").bad_lines[0].line_no == 2
    store.create("新的一条规则内容", "rule", T0)
    assert "{broken" in path.read_text("utf-8")  # a rewrite never drops what it could not read


_CHILD = """
import sys, signal, resource
from datetime import datetime, timezone
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.errors import MemselfError
mode = sys.argv[1]
if mode == "full":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
try:
    MemoryStore(DataPaths.default()).create("第二条规则内容", "rule", datetime.now(timezone.utc))
except MemselfError as exc:
    print("ERR", exc)
"""


def _run_child(args: list[str]) -> subprocess.CompletedProcess:
    # The child prints in its console's encoding (GBK in the foreign-platform mode).
    encoding = os.environ.get("PYTHONIOENCODING") or "utf-8"
    return subprocess.run(args, capture_output=True, encoding=encoding, timeout=60, env=os.environ.copy())


def test_read_only_directory_gives_clear_error_and_keeps_file(store: MemoryStore) -> None:
    store.create("回答一律使用中文", "rule", T0)
    before = store.paths.group_file("rule").read_bytes()
    root = shlex.quote(str(store.paths.root))
    # A read-only bind mount is a real read-only folder even for root (mode bits are not).
    script = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && {sys.executable} -c '{_CHILD}' ro"
    )
    result = _run_child(["unshare", "-m", "sh", "-c", script])
    assert "ERR 写入记忆失败，原文件保持不变" in result.stdout, result.stderr
    assert store.paths.group_file("rule").read_bytes() == before


def test_full_disk_during_write_keeps_old_file(store: MemoryStore) -> None:
    records = [record(f"m{i}", f"项目事实第 {i} 条，内容足够长以便撑大文件" * 3, 0.5) for i in range(200)]
    write_records(store, "rule", records)
    before = store.paths.group_file("rule").read_bytes()
    assert len(before) > 20000
    result = _run_child([sys.executable, "-c", _CHILD, "full"])
    assert "ERR 写入记忆失败，原文件保持不变" in result.stdout, result.stderr
    assert store.paths.group_file("rule").read_bytes() == before
    assert not [p for p in store.paths.root.iterdir() if ".tmp." in p.name]


def test_memory_record_round_trips_unknown_fields() -> None:
    raw = record("a", "回答使用中文", 0.5, futureField={"x": 1}, observations=4)
    memory = Memory.from_json(raw, "rule")
    out = memory.to_json()
    assert out["futureField"] == {"x": 1} and "observations" not in out
