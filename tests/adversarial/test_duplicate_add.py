"""Adding a memory that is already there reinforces it instead of making a second copy.

A user who adds the same rule twice (``memself rule add`` again, or a second "记住" that the judge
turns into a create) got two rules, both injected at every session start. "The same" is compared
after normalising: whitespace and punctuation ignored, full-width and half-width alike, Latin
letters case-insensitive. The existing memory gets the usual reinforce (+0.1 within the daily
cap; a deprecated one comes back when that lifts it over the line); a memory in the trash is not
brought back silently: the new one is created and the output says the trash holds a twin.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from memself.judge.apply import apply_proposal
from memself.judge.resolve import resolve
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.cli import memself
from tests.support.judge_helpers import NOW, configure, proposal, ready, stop

LATER = NOW + timedelta(days=2)


def records(group: str) -> list[dict]:
    return json.loads(memself("read", group, "--json").stdout)


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("改完代码不要自动 commit", "改完代码不要自动 commit"),
        ("改完代码不要自动 commit", "  改完代码，不要自动   COMMIT。 "),
        ("回答一律用中文, 不要用 emoji!", "回答一律用中文，不要用ｅｍｏｊｉ！"),
    ],
)
def test_cli_rule_add_twice_keeps_one_rule(first: str, again: str) -> None:
    assert memself("rule", "add", first).returncode == 0
    second = memself("rule", "add", again)
    assert second.returncode == 0, second.stderr
    [only] = records("rule")
    assert only["text"] == first.strip()
    assert "已有相同的规则" in second.stdout and "没有重复新增" in second.stdout
    assert only["id"] in second.stdout
    assert "已新增" not in second.stdout


def test_cli_project_add_twice_keeps_one_fact() -> None:
    memself("project", "add", "支付页灰度开关是 pay_new_flow")
    second = memself("project", "add", "支付页灰度开关是 PAY_NEW_FLOW。")
    assert "已有相同的项目事实" in second.stdout
    assert len(records("project")) == 1


def test_same_text_in_the_other_group_is_a_new_memory() -> None:
    memself("rule", "add", "支付页灰度开关是 pay_new_flow")
    added = memself("project", "add", "支付页灰度开关是 pay_new_flow")
    assert "已新增项目事实" in added.stdout
    assert len(records("rule")) == len(records("project")) == 1


def test_duplicate_reinforces_by_the_usual_path() -> None:
    store = MemoryStore(DataPaths.default())
    first = store.add("改完代码不要自动 commit", "rule", NOW)
    assert not first.duplicate and first.memory.confidence == 0.5
    same_day = store.add("改完代码，不要自动 commit。", "rule", NOW)
    # The creation day counts as full (the daily cap): nothing more today.
    assert same_day.duplicate and same_day.memory.id == first.memory.id and same_day.gain == 0
    later = store.add("改完代码不要自动COMMIT", "rule", LATER)
    assert later.duplicate and later.gain == pytest.approx(0.1)
    again = store.add("改完代码不要自动 commit", "rule", LATER)
    assert again.duplicate and again.gain == 0  # the daily cap holds
    [memory] = store.all()
    assert memory.confidence == pytest.approx(0.6) and memory.lastSeen == later.memory.lastSeen


def test_deprecated_duplicate_comes_back_as_reinforce_brings_it_back() -> None:
    store = MemoryStore(DataPaths.default())
    paths = store.paths
    old = store.add("测试环境的数据库是 pg-test-01", "project", NOW - timedelta(days=60)).memory
    lines = paths.group_file("project").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record.update(confidence=0.4, deprecated=True)
    paths.group_file("project").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    result = store.add("测试环境的数据库是 pg-test-01", "project", LATER)
    assert result.duplicate and result.revived and result.memory.id == old.id
    [memory] = store.all()
    assert memory.confidence == pytest.approx(0.5) and memory.active


def test_cli_says_a_deprecated_twin_is_back() -> None:
    memself("rule", "add", "提交信息用英文写")
    path = DataPaths.default().group_file("rule")
    record = json.loads(path.read_text(encoding="utf-8"))
    # Written long ago and idle since: today's reinforce is effective.
    old = "2020-01-01T08:00:00.000Z"
    record.update(confidence=0.35, deprecated=True, gainDay="2020-01-01", gainToday=0.1)
    record.update(createdAt=old, firstSeen=old, lastSeen=old)
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    again = memself("rule", "add", "提交信息用英文写")
    assert "已有相同的规则" in again.stdout and "+0.1" in again.stdout
    [only] = records("rule")
    assert only["confidence"] == pytest.approx(0.45) and only["deprecated"] is False
    assert "恢复" in again.stdout


def test_trashed_twin_is_not_resurrected() -> None:
    memself("rule", "add", "回答一律用中文")
    [gone] = records("rule")
    assert memself("delete", gone["id"]).returncode == 0
    again = memself("rule", "add", "回答一律用中文。")
    assert again.returncode == 0 and "已新增规则" in again.stdout
    assert "回收站" in again.stdout and gone["id"] in again.stdout
    [new] = records("rule")
    assert new["id"] != gone["id"] and new["confidence"] == 0.5
    trash = json.loads(memself("trash", "--json").stdout)
    assert [t["id"] for t in trash] == [gone["id"]]


def test_judge_create_of_a_duplicate_reinforces() -> None:
    """The judge's no-confirm path and Stop apply proposals through apply_proposal."""
    store = MemoryStore(DataPaths.default())
    existing = store.add("回答问题时使用中文", "rule", NOW - timedelta(days=3)).memory
    line = apply_proposal(store, proposal("回答问题时，使用中文。"), "create", "rule", NOW)
    [memory] = store.all()
    assert memory.id == existing.id and memory.confidence == pytest.approx(0.6)
    assert "已有相同的记忆" in line and "+0.1" in line and "新增了" not in line


def test_memory_resolve_create_of_a_duplicate_reinforces() -> None:
    """MCP: memory_resolve is the one tool that adds a memory."""
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", True)
    store = MemoryStore(paths)
    existing = store.add("回答问题时使用中文", "rule", NOW - timedelta(days=3)).memory
    sid = ready(paths, "记住：回答问题时使用中文", proposal("回答问题时使用中文 "))
    assert stop(paths, store) is not None
    notice = resolve(paths, store, "claude", sid, "create_rule", NOW)
    [memory] = store.all()
    assert memory.id == existing.id and memory.confidence == pytest.approx(0.6)
    assert notice.startswith("已有相同的记忆") and "+0.1" in notice and "归类：rule" in notice


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Use English  commit messages.", "use english commit messages"),
        ("回答用中文，谢谢！", "回答用中文,谢谢!"),
        ("ＡＢＣ　测试（一）", "abc 测试(一)"),
        ("line one\nline two", "line one line two"),
    ],
)
def test_dedup_key_equal(a: str, b: str) -> None:
    from memself.store.records import dedup_key

    assert dedup_key(a) == dedup_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("缩进用 2 个空格", "缩进用 4 个空格"),
        ("不要自动 commit", "要自动 commit"),
        ("a+b", "a-b"),
    ],
)
def test_dedup_key_different(a: str, b: str) -> None:
    from memself.store.records import dedup_key

    assert dedup_key(a) != dedup_key(b)
