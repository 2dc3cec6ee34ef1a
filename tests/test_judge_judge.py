"""The judge process body against a real local HTTP server and the real store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memself.judge import jobs
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import API_KEY, NOW, clock, judge, overlap_nearest, start_job
from tests.support.judge_helpers import judged_data as setup
from tests.support.judge_helpers import run_judge_job as run
from tests.support.judge_server import Reply, dedup, not_memory, plain, remember, sse

__all__ = ["judge"]


def assert_secret_free(paths: DataPaths, judge) -> None:
    for path in [paths.log_file, *paths.side_dir.glob("*.json")]:
        if path.exists():
            assert API_KEY not in path.read_text()
    for request in judge.requests:
        assert API_KEY not in request.raw


def test_confirm_on_empty_library_one_call_and_redacted(judge) -> None:
    paths, store = setup(judge, confirm=True)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    sid = start_job(paths, f"记住：部署脚本用的令牌是 {token}，以后发布都用它")
    assert token not in jobs.job_path(paths, sid).read_text()
    judge.script(sse(remember("发布时部署脚本使用固定令牌", "project", "部署脚本用的令牌")))
    job = run(paths, store, sid)
    assert job["status"] == "ready" and not job.get("applied")
    proposal = job["proposal"]
    assert proposal["action"] == "create" and proposal["category"] == "project"
    assert proposal["text"] == "发布时部署脚本使用固定令牌" and proposal["score"] is None
    assert len(judge.requests) == 1
    assert token not in judge.user_messages[0] and "[已隐去]" in judge.user_messages[0]
    assert store.all() == []
    assert_secret_free(paths, judge)


def test_confirm_off_create_writes_and_leaves_notice(judge) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, "支付页新流程的灰度开关是 pay_new_flow，记住")
    judge.script(plain(remember("支付页新流程的灰度开关是 pay_new_flow", "project")))
    job = run(paths, store, sid)
    [memory] = store.all()
    assert (memory.text, memory.category, memory.confidence) == (
        "支付页新流程的灰度开关是 pay_new_flow",
        "project",
        0.5,
    )
    assert job["status"] == "ready" and job["applied"] is True and not job["prompted"]
    assert job["notice"] == (
        "记忆插件memory-self-evolution新增了一条记忆："
        '"支付页新流程的灰度开关是 pay_new_flow"。归类：project（项目事实）'
    )


def existing(store: MemoryStore, text: str, group: str = "rule"):
    return store.create(text, group, NOW - timedelta(days=3))


@pytest.mark.parametrize("confirm", [True, False])
def test_reinforce(judge, confirm: bool) -> None:
    paths, store = setup(judge, confirm)
    old = existing(store, "回答问题时一律使用中文")
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(sse(remember("回答问题时使用中文")), sse(dedup("reinforce", old.id)))
    job = run(paths, store, sid)
    assert len(judge.requests) == 2
    dedup_message = judge.user_messages[1]
    assert dedup_message.startswith("new：回答问题时使用中文\ncandidates：")
    assert old.id in dedup_message and dedup_message.endswith("candidates 已按余弦相似度从高到低排列。")
    proposal = job["proposal"]
    assert (proposal["action"], proposal["targetId"], proposal["targetText"]) == (
        "reinforce",
        old.id,
        "回答问题时一律使用中文",
    )
    assert proposal["score"] is not None
    if confirm:
        assert store.get(old.id).confidence == 0.5
    else:
        assert store.get(old.id).confidence == 0.6 and len(store.all()) == 1
        assert "强化了一条记忆" in job["notice"] and "置信度 +0.1" in job["notice"]
        assert job["notice"].endswith("归类：rule（规则与偏好）")


def test_merge_and_replace_confirm_off(judge) -> None:
    paths, store = setup(judge, confirm=False)
    a = existing(store, "git 提交信息使用英文")
    b = existing(store, "代码缩进统一用 2 个空格", "project")
    sid = start_job(paths, "提交信息用英文，并且遵循 Conventional Commits，记住")
    merged = "git 提交信息使用英文，并遵循 Conventional Commits 格式"
    judge.script(sse(remember("提交信息遵循 Conventional Commits")), sse(dedup("merge", a.id, merged)))
    run(paths, store, sid)
    assert store.get(a.id).text == merged and store.get(a.id).confidence == 0.6
    sid2 = start_job(paths, "记住：缩进统一用 4 个空格", turn="turn-2")
    judge.script(
        sse(remember("代码缩进统一用 4 个空格")), sse(dedup("replace", b.id, "模型自己改写的正文不应被使用"))
    )
    job = run(paths, store, sid2)
    after = store.get(b.id)
    assert after.text == "代码缩进统一用 4 个空格" and after.confidence == 0.5
    assert job["notice"].endswith("归类：project（项目事实）")  # the target's group
    assert "替换了一条记忆" in job["notice"]


@pytest.mark.parametrize("confirm", [True, False])
def test_id_not_among_candidates_is_unsure(judge, confirm: bool) -> None:
    paths, store = setup(judge, confirm)
    near = existing(store, "回答问题时一律使用中文")
    sid = start_job(paths, "记住：回答要用简体中文")
    judge.script(sse(remember("回答时使用简体中文")), sse(dedup("reinforce", "mem-invented")))
    job = run(paths, store, sid)
    proposal = job["proposal"]
    assert proposal["action"] == "unsure" and proposal["targetId"] == near.id
    if confirm:
        assert len(store.all()) == 1
    else:  # no popup: a separate memory is created and the original is untouched
        assert sorted(m.text for m in store.all()) == ["回答时使用简体中文", "回答问题时一律使用中文"]
        assert store.get(near.id).confidence == 0.5


def test_code_fence_answer_is_accepted(judge) -> None:
    paths, store = setup(judge, confirm=True)
    sid = start_job(paths, "记住：改完代码不要自动 commit")
    judge.script(sse("```json\n" + remember("修改代码后不要自动 git commit") + "\n```"))
    assert run(paths, store, sid)["proposal"]["text"] == "修改代码后不要自动 git commit"


def timeout_for(replies: list[Reply]) -> float:
    """The judge's HTTP timeout for a scripted exchange: short where the server hangs on purpose
    (that timeout is the fault under test), generous elsewhere, so that a loaded machine
    answering a good reply slowly is not taken for a hang."""
    return 3.0 if any(r.kind == "hang" for r in replies) else 30.0


FAULTS = [
    ([sse("这句话值得记住")], "judge-failed"),
    ([sse(not_memory())], "not-memory"),
    ([Reply("empty")], "旁路接口没有正文"),
    ([Reply("status", f'{{"error":"invalid key {API_KEY}"}}', 401)], "旁路接口 401: "),
    ([Reply("status", '{"error":"rate limited"}', 429)], "旁路接口 429: "),
    ([Reply("status", "internal", 500)], "旁路接口 500: "),
    ([Reply("half", remember("回答问题时使用中文"))], "旁路接口"),
    ([Reply("hang")], "旁路接口超时"),
    ([sse(remember("短"))], "invalid-text"),
]


@pytest.mark.parametrize(("replies", "reason"), FAULTS)
@pytest.mark.parametrize("confirm", [True, False])
def test_fault_ends_in_none_nothing_written(judge, replies, reason: str, confirm: bool) -> None:
    paths, store = setup(judge, confirm)
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(*replies)
    job = run(paths, store, sid, timeout=timeout_for(replies))
    assert job["status"] == "none" and job["reason"].startswith(reason)
    assert job["proposal"] is None and not job.get("applied")
    assert store.all() == []
    assert_secret_free(paths, judge)


@pytest.mark.parametrize("second", [Reply("status", "boom", 500), Reply("hang")])
def test_dedup_call_failure_writes_nothing(judge, second: Reply) -> None:
    paths, store = setup(judge, confirm=False)
    old = existing(store, "回答问题时一律使用中文")
    before = store.paths.group_file("rule").read_bytes()
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(sse(remember("回答问题时使用中文")), second)
    job = run(paths, store, sid, timeout=timeout_for([second]))
    assert job["status"] == "none" and len(judge.requests) == 2
    assert store.paths.group_file("rule").read_bytes() == before
    assert store.get(old.id).confidence == 0.5


def test_at_most_two_calls_and_only_running_jobs(judge) -> None:
    paths, store = setup(judge, confirm=True)
    existing(store, "回答问题时一律使用中文")
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(sse(remember("回答问题时使用中文")), sse("不是 JSON"), sse("x"), sse("y"))
    job = run(paths, store, sid)
    assert len(judge.requests) == 2 and job["proposal"]["action"] == "unsure"
    assert run(paths, store, sid) is None  # already finished: a second judge does nothing
    assert len(judge.requests) == 2


def test_job_timed_out_by_stop_is_not_applied_late(judge) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, "记住：以后回答都用中文")
    judge.script(sse(remember("回答问题时使用中文")))
    # Stop gave up on the job while the judge was still waiting for the model.
    jobs.finish(paths, sid, NOW, jobs.NONE, "judge-timeout")
    job_file = jobs.job_path(paths, sid)
    original = jobs.read_job(job_file)
    original["status"] = "running"  # the judge read the job before Stop finished it
    from memself.judge import worker as judge_mod

    proposal = judge_mod.build_proposal(
        original, lambda s, u: remember("回答问题时使用中文"), overlap_nearest(store)
    )
    assert judge_mod._apply_now(paths, store, sid, proposal, clock()) is None
    assert store.all() == [] and jobs.load_job(paths, sid)["reason"] == "judge-timeout"


def test_missing_api_key_ends_job(judge) -> None:
    paths, store = setup(judge, confirm=True)
    sid = start_job(paths, "记住：以后回答都用中文")
    paths.side_secret.unlink()
    job = run(paths, store, sid)
    assert job["reason"] == "api-not-configured" and judge.requests == []
