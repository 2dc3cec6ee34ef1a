"""Stop follow-ups: notices, the MEMORY_CONFIRM_V1 dialog, isolation, supersede, Cursor restore
(checklist 17, 18, 21, 23)."""

from __future__ import annotations

import stat
from datetime import timedelta

from memself.config import load_config, set_config_value
from memself.hosts import HOSTS
from memself.judge import jobs
from memself.judge.followup import confirm_pair_path, restore_continuation_prompt
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text.messages import NOTICE_HEADER
from tests.support.judge_helpers import NOW, Clock, configure, judge_exits, proposal, ready, start_job, stop


def env(confirm: bool = True) -> tuple[DataPaths, MemoryStore]:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", confirm)
    return paths, MemoryStore(paths)


def test_confirm_off_notice_then_nothing_checklist_18() -> None:
    paths, store = env(confirm=False)
    sid = start_job(paths, "记住：以后回答都用中文")
    notice = '记忆插件memory-self-evolution新增了一条记忆："回答问题时使用中文"。归类：rule（规则与偏好）'
    jobs.finish(
        paths, sid, NOW, jobs.READY, proposal=proposal("回答问题时使用中文"), applied=True, notice=notice
    )
    visible, model = stop(paths, store)
    assert visible == f"{NOTICE_HEADER}\n结果：\n{notice}"
    assert model.startswith("MEMORY_CONFIRM_V1\n") and "不要做其他任何操作" in model
    assert model.endswith(f"结果\n{notice}")
    assert jobs.load_job(paths, sid)["prompted"] is True
    assert stop(paths, store) is None


def test_confirm_off_applies_proposals_left_from_confirm_on() -> None:
    paths, store = env(confirm=True)
    ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文", category="project"))
    set_config_value(paths, "confirm", "false")
    visible, _ = stop(paths, store)
    [memory] = store.all()
    assert memory.category == "project" and memory.confidence == 0.5
    assert "归类：project（项目事实）" in visible


def test_confirm_on_dialog_contents_checklist_21() -> None:
    paths, store = env()
    target = store.create("git 提交信息使用英文", "rule", NOW - timedelta(days=2))
    a = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"))
    b = ready(
        paths,
        "提交信息也要写 Conventional Commits",
        turn="t2",
        at=NOW + timedelta(seconds=1),
        prop=proposal(
            "提交信息遵循 Conventional Commits",
            "merge",
            target=target,
            merged="git 提交信息使用英文并遵循 Conventional Commits",
        ),
    )
    visible, model = stop(paths, store)
    assert visible.startswith(NOTICE_HEADER)
    assert "1. 建议新增记忆「回答问题时使用中文」。" in visible
    assert (
        "2. 建议合并。新记忆「提交信息遵循 Conventional Commits」并入已有记忆「git 提交信息使用英文」。"
        "合并后「git 提交信息使用英文并遵循 Conventional Commits」。"
    ) in visible
    for needle in (
        "MEMORY_CONFIRM_V1",
        "AskUserQuestion",
        "ask_followup_question",
        "memory_resolve",
        f"sessionID：{a}",
        f"sessionID：{b}",
        "create_rule",
        "create_project",
        "discard",
        "Skipped",
        "记忆确认·插件",
        "memory_propose、update_memory",
        "题面：检测到一条记忆。是否落成记忆。",
        "- 落成，使用推荐标签 rule「回答问题时使用中文」 → create_rule",
        "- 落成，把标签改为 project「回答问题时使用中文」 → create_project",
        "- 不落成 → discard",
        "- 合并进已有记忆 「git 提交信息使用英文」 → merge",
        "- 仍新建，使用推荐标签 rule「提交信息遵循 Conventional Commits」 → create_rule",
        "合并后正文：git 提交信息使用英文并遵循 Conventional Commits",
        "与最相近记忆的相似度：0.61",
        "最相近记忆：git 提交信息使用英文",
    ):
        assert needle in model, needle
    for banned in ("memory_persist", "memory_reinforce", "memory_merge"):
        assert banned not in model
    assert all(jobs.load_job(paths, s)["prompted"] for s in (a, b))
    assert stop(paths, store) is None  # prompted: no loop


def test_cursor_phrasing_and_replace_options() -> None:
    paths, store = env()
    target = store.create("缩进统一用 2 个空格", "project", NOW - timedelta(days=2))
    ready(
        paths,
        "记住：缩进用 4 个空格",
        proposal("缩进统一用 4 个空格", "replace", "project", target),
        host="cursor",
    )
    _, model = stop(paths, store, host="cursor")
    assert "ask_followup_question" not in model and "update_memory" not in model
    assert "AskQuestion" in model and "你自带的提问工具" in model
    assert "- 用新说法替换已有记忆 「缩进统一用 2 个空格」 → replace" in model
    assert "- 仍新建，把标签改为 rule「缩进统一用 4 个空格」 → create_rule" in model


def test_unsure_offers_reinforce_and_create() -> None:
    paths, store = env()
    target = store.create("回答问题时一律使用中文", "rule", NOW - timedelta(days=2))
    ready(paths, "记住：回答用简体中文", proposal("回答时使用简体中文", "unsure", target=target))
    visible, model = stop(paths, store)
    assert "建议强化已有记忆「回答问题时一律使用中文」。新说法「回答时使用简体中文」。" in visible
    assert "- 强化已有记忆 「回答问题时一律使用中文」 → reinforce" in model
    assert "- 仍新建，使用推荐标签 rule「回答时使用简体中文」 → create_rule" in model


def test_only_this_host_and_session_checklist_17() -> None:
    paths, store = env()
    mine = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"))
    other_session = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), session="sess-2")
    other_host = ready(
        paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), host="codebuddy", session="sess-1"
    )
    untouched = {s: jobs.job_path(paths, s).read_bytes() for s in (other_session, other_host)}
    _, model = stop(paths, store)
    assert mine in model and other_session not in model and other_host not in model
    assert {s: jobs.job_path(paths, s).read_bytes() for s in untouched} == untouched
    _, model_cb = stop(paths, store, host="codebuddy")
    assert other_host in model_cb and mine not in model_cb and other_session not in model_cb


def test_new_dialog_supersedes_unanswered_one_checklist_23() -> None:
    paths, store = env()
    old = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"))
    elsewhere = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), session="sess-2")
    stop(paths, store)
    stop(paths, store, session="sess-2")
    assert stop(paths, store) is None  # nothing new: the open dialog is not superseded
    assert jobs.load_job(paths, old)["status"] == "ready"
    new = ready(paths, "记住：提交前先跑测试", proposal("提交代码前先运行全部测试"), turn="t2")
    _, model = stop(paths, store)
    assert new in model and old not in model
    assert jobs.load_job(paths, old)["reason"] == "superseded"
    assert jobs.load_job(paths, elsewhere)["status"] == "ready"  # another session's dialog


def test_waits_for_running_job_then_shows_it() -> None:
    paths, store = env()
    sid = start_job(paths, "记住：以后回答都用中文")
    clock = Clock()
    original_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        original_sleep(seconds)
        if clock.sleeps == 3:  # the judge finishes while Stop is waiting
            jobs.finish(paths, sid, clock.now, jobs.READY, proposal=proposal("回答问题时使用中文"))

    clock.sleep = sleep
    result = stop(paths, store, clock=clock)
    assert result is not None and sid in result[1] and clock.sleeps == 3


def test_wait_is_bounded_by_side_wait_ms() -> None:
    paths, store = env()
    set_config_value(paths, "sideWaitMs", "1000")
    sid = start_job(paths, "记住：以后回答都用中文")
    clock = Clock()
    assert stop(paths, store, clock=clock) is None
    assert clock.sleeps == 5 and jobs.load_job(paths, sid)["status"] == "running"


def test_stuck_job_finished_as_judge_timeout() -> None:
    paths, store = env()
    sid = start_job(paths, "记住：以后回答都用中文", now=NOW - timedelta(seconds=200))
    clock = Clock()
    assert stop(paths, store, clock=clock) is None and clock.sleeps == 0
    assert jobs.load_job(paths, sid)["reason"] == "judge-timeout"


def test_job_of_a_dead_judge_ends_at_once() -> None:
    paths, store = env()
    sid = start_job(paths, "记住：以后回答都用中文")
    judge_exits(sid)  # killed: nobody holds the job's run lock any more
    clock = Clock()
    assert stop(paths, store, clock=clock) is None and clock.sleeps == 0
    job = jobs.load_job(paths, sid)
    assert (job["status"], job["reason"]) == ("none", "judge-died")
    assert "side-judge-died" in paths.log_file.read_text(encoding="utf-8")


def test_a_judge_that_finished_before_exiting_keeps_its_result() -> None:
    paths, store = env()
    sid = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"))
    judge_exits(sid)
    result = stop(paths, store)
    assert result is not None and sid in result[1]


def test_job_without_run_lock_is_waited_for_as_before() -> None:
    """Jobs started by the original plugin or an older memself have no run lock."""
    paths, store = env()
    set_config_value(paths, "sideWaitMs", "1000")
    job = jobs.new_job("s_" + "a" * 64, "claude", "sess-1", "t1", "记住：以后回答都用中文", NOW)
    assert jobs.create_job(paths, job)
    clock = Clock()
    assert stop(paths, store, clock=clock) is None
    assert clock.sleeps == 5 and jobs.load_job(paths, job["id"])["status"] == "running"


def test_no_session_key_returns_nothing() -> None:
    paths, store = env()
    assert stop(paths, store, session="") is None


def test_cursor_restore_per_session() -> None:
    paths, store = env()
    a = ready(
        paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), host="cursor", session="conv-A"
    )
    b = ready(
        paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), host="cursor", session="conv-B"
    )
    visible_a, model_a = stop(paths, store, host="cursor", session="conv-A", keep=True)
    visible_b, model_b = stop(paths, store, host="cursor", session="conv-B", keep=True)
    assert visible_a == visible_b  # identical visible texts, different hidden sessionIDs
    path_a = confirm_pair_path(paths, "cursor", "conv-A")
    assert stat.S_IMODE(path_a.stat().st_mode) == 0o600
    restored_b = restore_continuation_prompt(paths, "cursor", "conv-B", visible_b)
    assert restored_b == model_b and b in restored_b and a not in restored_b
    assert not confirm_pair_path(paths, "cursor", "conv-B").exists()
    # Session B cannot reach A's text; a missing pair rebuilds no sessionID at all.
    again = restore_continuation_prompt(paths, "cursor", "conv-B", visible_a)
    assert a not in again and "memory_resolve" in again
    assert restore_continuation_prompt(paths, "cursor", "conv-A", visible_a) == model_a
    assert restore_continuation_prompt(paths, "cursor", "conv-A", "帮我看看这个函数") is None


def test_cursor_restore_rebuilds_result_lines_without_file() -> None:
    paths, _ = env()
    line = '记忆插件memory-self-evolution新增了一条记忆："回答问题时使用中文"。归类：rule（规则与偏好）'
    restored = restore_continuation_prompt(paths, "cursor", "conv-A", f"{NOTICE_HEADER}\n结果：\n{line}")
    assert restored.startswith("MEMORY_CONFIRM_V1\n") and restored.endswith(line)
    assert "不要做其他任何操作" in restored


def test_take_followup_real_clock_and_pair_saved() -> None:
    from memself.judge.followup import take_followup

    paths, _ = env()
    set_config_value(paths, "sideWaitMs", "300")
    sid = start_job(paths, "记住：以后回答都用中文", host="cursor", session="conv-9")
    other = ready(
        paths,
        "记住：提交前先跑测试",
        proposal("提交代码前先运行全部测试"),
        host="cursor",
        session="conv-9",
        turn="t9",
    )
    result = take_followup(paths, load_config(paths), "cursor", "conv-9", HOSTS["cursor"].POPUP, NOW)
    assert result is not None and other in result[1] and sid not in result[1]
    assert jobs.load_job(paths, sid)["status"] == "running"  # waited 300 ms, then gave up on it
    assert restore_continuation_prompt(paths, "cursor", "conv-9", result[0]) == result[1]


def test_stale_confirm_pairs_pruned() -> None:
    import os

    paths, _ = env()
    jobs.ensure_side_dir(paths)
    pair = confirm_pair_path(paths, "claude", "old-session")
    pair.write_text("{}")
    jobs.list_jobs(paths, NOW)
    assert pair.exists()
    old = NOW.timestamp() - 25 * 3600
    os.utime(pair, (old, old))
    jobs.list_jobs(paths, NOW)
    assert not pair.exists()


def test_rendered_by_each_host_checklist_21() -> None:
    from memself.hosts import HOSTS
    from memself.hosts.base import EventKind, HookEvent, HookReply

    paths, store = env()
    for host in HOSTS:
        ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), host=host, session=f"s-{host}")
    for host, adapter in HOSTS.items():
        visible, model = stop(paths, store, host=host, session=f"s-{host}")
        event = HookEvent(host, EventKind.STOP, "Stop", f"s-{host}", "", "", "/tmp", False)
        out = adapter.render(event, HookReply(continuation=model, visible=visible))
        if host == "cursor":
            assert out == {"followup_message": visible}
            assert "ask_followup_question" not in model and "update_memory" not in model
        else:
            assert out["decision"] == "block" and "hookSpecificOutput" not in out
            assert out["reason"].startswith(visible) and model in out["reason"]
            assert "ask_followup_question" in model and "update_memory" in model
