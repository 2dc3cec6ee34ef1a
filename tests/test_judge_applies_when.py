"""The judge's appliesWhen (everyday requests a memory matters for), from a real HTTP judge answer
through the sealed job, the Stop popup and memory_resolve into the stored memory."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from memself.config import set_config_value
from memself.judge.resolve import resolve
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import NOW, judge, start_job, stop
from tests.support.judge_helpers import judged_data as setup
from tests.support.judge_helpers import run_judge_job as run
from tests.support.judge_server import dedup, plain, remember, sse

__all__ = ["judge"]

RULE = "所有存库的时间一律使用 UTC"
WHEN = ["记一下快递员取件的时间点", "给订单表加个创建时间字段", "日志里的时间怎么显示"]
LINE = "适用场景：记一下快递员取件的时间点；给订单表加个创建时间字段；日志里的时间怎么显示"


def records(paths: DataPaths, group: str = "rule") -> list[dict]:
    return [json.loads(line) for line in paths.group_file(group).read_text("utf-8").splitlines()]


def existing(store: MemoryStore, text: str, when: tuple[str, ...] = ()):
    return store.create(text, "rule", NOW - timedelta(days=3), applies_when=when)


def test_confirm_off_create_stores_them(judge) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    judge.script(sse(remember(RULE, when=WHEN)))
    job = run(paths, store, sid)
    assert job["applied"] is True and job["proposal"]["appliesWhen"] == WHEN
    [memory] = store.all()
    assert memory.text == RULE and memory.appliesWhen == tuple(WHEN)
    assert records(paths)[0]["appliesWhen"] == WHEN


def test_confirm_on_popup_shows_them_and_resolve_stores_them(judge) -> None:
    paths, store = setup(judge, confirm=True)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    judge.script(plain(remember(RULE, when=WHEN)))
    job = run(paths, store, sid)
    assert job["status"] == "ready" and job["proposal"]["appliesWhen"] == WHEN and store.all() == []
    visible, model = stop(paths, store)
    assert f"1. 建议新增记忆「{RULE}」。\n   {LINE}" in visible
    assert f"正文：{RULE}\n推荐标签：rule\n佐证：" in model and f"\n{LINE}\n" in model
    resolve(paths, store, "claude", sid, "create_project", NOW + timedelta(seconds=5))
    [memory] = store.all()
    assert memory.category == "project" and memory.appliesWhen == tuple(WHEN)


def test_confirm_turned_off_applies_them_at_stop(judge) -> None:
    paths, store = setup(judge, confirm=True)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    judge.script(sse(remember(RULE, when=WHEN)))
    run(paths, store, sid)
    set_config_value(paths, "confirm", "false")
    stop(paths, store)
    [memory] = store.all()
    assert memory.appliesWhen == tuple(WHEN)


@pytest.mark.parametrize("confirm", [True, False])
def test_answer_without_them_stays_valid(judge, confirm: bool) -> None:
    paths, store = setup(judge, confirm)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    judge.script(sse(remember(RULE)))
    job = run(paths, store, sid)
    assert job["status"] == "ready" and job["proposal"]["text"] == RULE
    assert "appliesWhen" not in job["proposal"]
    visible, model = stop(paths, store)
    assert "适用场景" not in visible + model
    if confirm:
        resolve(paths, store, "claude", sid, "create_rule", NOW + timedelta(seconds=5))
    [record] = records(paths)
    assert "appliesWhen" not in record and record["text"] == RULE


MALFORMED = [
    "记一下快递员取件的时间点",  # one string, not a list
    {"0": "记一下快递员取件的时间点"},
    [1, 2.5, None, True, ["嵌套的请求"], {"q": "对象里的请求"}],
    ["", "   ", "x", "\n"],
    ["长" * 81],
    None,
    42,
]


@pytest.mark.parametrize("value", MALFORMED, ids=[f"m{i}" for i in range(len(MALFORMED))])
def test_malformed_ones_are_dropped_and_the_proposal_kept(judge, value: object) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    judge.script(sse(remember(RULE, when=value)))
    job = run(paths, store, sid)
    assert job["status"] == "ready" and job["applied"] is True
    assert "appliesWhen" not in job["proposal"]
    [record] = records(paths)
    assert record["text"] == RULE and "appliesWhen" not in record


def test_mixed_list_is_cleaned_and_bounded(judge) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, "记住：存库的时间一律 UTC")
    when = [
        "记一下取件时间",
        3,
        "  两行\n的请求  ",
        "记一下取件时间",
        "a",
        "长" * 81,
        "第三条请求",
        "第四条请求",
        "第五条",
    ]
    judge.script(sse(remember(RULE, when=when)))
    run(paths, store, sid)
    [memory] = store.all()
    assert memory.appliesWhen == ("记一下取件时间", "两行 的请求", "第三条请求", "第四条请求")


def test_merge_keeps_the_judges_new_requests(judge) -> None:
    paths, store = setup(judge, confirm=False)
    old = existing(store, "git 提交信息使用英文", ("帮我写个提交说明",))
    merged = "git 提交信息使用英文，并遵循 Conventional Commits 格式"
    sid = start_job(paths, "提交信息用英文，并且遵循 Conventional Commits，记住")
    judge.script(
        sse(remember("提交信息遵循 Conventional Commits", when=["提交一下"])),
        sse(dedup("merge", old.id, merged, when=["帮我提交一下", "改动分两次提交"])),
    )
    job = run(paths, store, sid)
    assert job["proposal"]["mergedAppliesWhen"] == ["帮我提交一下", "改动分两次提交"]
    after = store.get(old.id)
    assert after.text == merged and after.appliesWhen == ("帮我提交一下", "改动分两次提交")


def test_merge_without_its_own_requests_takes_the_new_statements(judge) -> None:
    paths, store = setup(judge, confirm=False)
    old = existing(store, "git 提交信息使用英文", ("帮我写个提交说明",))
    sid = start_job(paths, "提交信息用英文，并且遵循 Conventional Commits，记住")
    judge.script(
        sse(remember("提交信息遵循 Conventional Commits", when=["提交一下", "写个 commit message"])),
        sse(dedup("merge", old.id, "git 提交信息使用英文，并遵循 Conventional Commits 格式")),
    )
    run(paths, store, sid)
    assert store.get(old.id).appliesWhen == ("提交一下", "写个 commit message")


def test_replace_takes_the_new_requests_and_drops_old_ones_when_there_are_none(judge) -> None:
    paths, store = setup(judge, confirm=False)
    a = existing(store, "代码缩进统一用 2 个空格", ("格式化一下这个文件",))
    b = existing(store, "回答问题时一律使用英文", ("解释一下这个报错",))
    sid = start_job(paths, "记住：缩进统一用 4 个空格")
    judge.script(
        sse(remember("代码缩进统一用 4 个空格", when=["新建一个 Python 文件"])), sse(dedup("replace", a.id))
    )
    run(paths, store, sid)
    assert store.get(a.id).text == "代码缩进统一用 4 个空格"
    assert store.get(a.id).appliesWhen == ("新建一个 Python 文件",)
    sid = start_job(paths, "记住：回答一律使用中文", turn="turn-2")
    judge.script(sse(remember("回答问题时一律使用中文")), sse(dedup("replace", b.id)))
    run(paths, store, sid)
    assert store.get(b.id).text == "回答问题时一律使用中文"
    assert store.get(b.id).appliesWhen == ()  # written for the old text: the filler asks anew


def test_reinforce_fills_only_a_memory_that_has_none(judge) -> None:
    paths, store = setup(judge, confirm=False)
    bare = existing(store, "回答问题时一律使用中文")
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(
        sse(remember("回答问题时使用中文", when=["解释一下这个报错"])), sse(dedup("reinforce", bare.id))
    )
    run(paths, store, sid)
    assert store.get(bare.id).appliesWhen == ("解释一下这个报错",)
    sid = start_job(paths, "记住：回答一定用中文", turn="turn-2")
    judge.script(sse(remember("回答问题时要用中文", when=["写个 README"])), sse(dedup("reinforce", bare.id)))
    run(paths, store, sid)
    assert store.get(bare.id).appliesWhen == ("解释一下这个报错",)


def test_resolve_merge_from_the_popup_keeps_the_merged_requests(judge) -> None:
    paths, store = setup(judge, confirm=True)
    old = existing(store, "git 提交信息使用英文", ("帮我写个提交说明",))
    sid = start_job(paths, "提交信息用英文，并且遵循 Conventional Commits，记住")
    judge.script(
        sse(remember("提交信息遵循 Conventional Commits", when=["提交一下"])),
        sse(
            dedup(
                "merge",
                old.id,
                "git 提交信息使用英文，并遵循 Conventional Commits 格式",
                when=["帮我提交一下"],
            )
        ),
    )
    run(paths, store, sid)
    _, model = stop(paths, store)
    assert "适用场景：提交一下\n" in model and "合并后适用场景：帮我提交一下\n" in model
    resolve(paths, store, "claude", sid, "merge", NOW + timedelta(seconds=5))
    assert store.get(old.id).appliesWhen == ("帮我提交一下",)
