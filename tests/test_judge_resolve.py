"""memory_resolve: only this host's prompted, unanswered proposal, only the offered options,
text and target from the proposal (checklist 19, 20, 22)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from memself.judge import jobs
from memself.judge.resolve import (
    MSG_DISCARDED,
    MSG_INVALID,
    MSG_MISMATCH,
    MSG_NOT_FOUND,
    ResolveRejected,
    resolve,
)
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import NOW, configure, proposal, ready, start_job, stop


@pytest.fixture
def env() -> tuple[DataPaths, MemoryStore]:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", True)
    return paths, MemoryStore(paths)


def prompted(paths, store, prop, host="claude", session="sess-1", turn="t1") -> str:
    sid = ready(paths, f"记住：{prop['text']}", prop, host=host, session=session, turn=turn)
    assert stop(paths, store, host=host, session=session) is not None
    return sid


def rejected(paths, store, sid, decision, host="claude") -> str:
    with pytest.raises(ResolveRejected) as info:
        resolve(paths, store, host, sid, decision, NOW)
    return str(info.value)


@pytest.mark.parametrize(("decision", "group"), [("create_rule", "rule"), ("create_project", "project")])
def test_create_with_group_from_decision(env, decision: str, group: str) -> None:
    paths, store = env
    sid = prompted(paths, store, proposal("回答问题时使用中文", category="rule"))
    notice = resolve(paths, store, "claude", sid, decision, NOW)
    [memory] = store.all()
    assert (memory.text, memory.category, memory.confidence) == ("回答问题时使用中文", group, 0.5)
    label = "规则与偏好" if group == "rule" else "项目事实"
    assert notice == f"生成了一条记忆：回答问题时使用中文。归类：{group}（{label}）"
    job = jobs.load_job(paths, sid)
    assert job["status"] == "none" and job["applied"] is True
    assert rejected(paths, store, sid, decision) == MSG_NOT_FOUND  # reused id
    assert len(store.all()) == 1


def test_reinforce_merge_replace_use_the_proposal(env) -> None:
    paths, store = env
    old = NOW - timedelta(days=3)
    a = store.create("回答问题时一律使用中文", "rule", old)
    b = store.create("git 提交信息使用英文", "rule", old)
    c = store.create("缩进统一用 2 个空格", "project", old)
    # Separate sessions: within one session each new popup supersedes the previous one.
    s1 = prompted(paths, store, proposal("回答时使用中文", "reinforce", target=a), session="x")
    s2 = prompted(
        paths,
        store,
        proposal(
            "提交信息遵循 Conventional Commits",
            "merge",
            target=b,
            merged="git 提交信息使用英文并遵循 Conventional Commits",
        ),
        session="y",
    )
    s3 = prompted(paths, store, proposal("缩进统一用 4 个空格", "replace", target=c), session="z")
    n1 = resolve(paths, store, "claude", s1, "reinforce", NOW)
    assert store.get(a.id).confidence == 0.6 and store.get(a.id).text == "回答问题时一律使用中文"
    assert n1 == "强化了一条记忆：回答问题时一律使用中文，置信度 +0.1。归类：rule（规则与偏好）"
    n2 = resolve(paths, store, "claude", s2, "merge", NOW)
    assert store.get(b.id).text == "git 提交信息使用英文并遵循 Conventional Commits"
    assert store.get(b.id).confidence == 0.6 and "合并了一条记忆：旧记忆「git 提交信息使用英文」" in n2
    n3 = resolve(paths, store, "claude", s3, "replace", NOW)
    assert store.get(c.id).text == "缩进统一用 4 个空格" and store.get(c.id).confidence == 0.5
    assert n3.endswith("归类：project（项目事实）")
    assert len(store.all()) == 3


def test_discard(env) -> None:
    paths, store = env
    sid = prompted(paths, store, proposal("回答问题时使用中文"))
    assert resolve(paths, store, "claude", sid, "discard", NOW) == MSG_DISCARDED
    job = jobs.load_job(paths, sid)
    assert (job["status"], job["reason"]) == ("none", "user-skip") and store.all() == []


def test_rejections_checklist_19_20_22(env) -> None:
    paths, store = env
    sid = prompted(paths, store, proposal("回答问题时使用中文"))
    files = sorted(p.name for p in paths.side_dir.iterdir())
    missing = "s_" + "f" * 64
    assert rejected(paths, store, missing, "create_rule") == MSG_NOT_FOUND
    assert not jobs.job_path(paths, missing).exists()
    assert sorted(p.name for p in paths.side_dir.iterdir()) == files  # nothing created
    assert rejected(paths, store, "s_forged", "create_rule") == MSG_INVALID
    assert rejected(paths, store, sid.upper(), "create_rule") == MSG_INVALID
    assert rejected(paths, store, "../../config", "create_rule") == MSG_INVALID  # outside-path: ok (an id)
    assert rejected(paths, store, sid, "persist") == MSG_INVALID
    assert rejected(paths, store, sid, "create_rule", host="cursor") == MSG_NOT_FOUND
    assert rejected(paths, store, sid, "reinforce") == MSG_MISMATCH  # a create proposal
    assert rejected(paths, store, sid, "merge") == MSG_MISMATCH
    assert rejected(paths, store, sid, "replace") == MSG_MISMATCH
    assert store.all() == [] and jobs.load_job(paths, sid)["status"] == "ready"


def test_reinforce_without_target_rejected(env) -> None:
    paths, store = env
    sid = prompted(paths, store, proposal("回答问题时使用中文", "reinforce"))
    assert rejected(paths, store, sid, "reinforce") == MSG_MISMATCH


def test_unprompted_and_other_session_jobs_rejected(env) -> None:
    paths, store = env
    # Session B's proposal has not been shown yet: a model in session A guessing it gets nothing.
    unshown = ready(paths, "记住：以后回答都用中文", proposal("回答问题时使用中文"), session="B")
    assert rejected(paths, store, unshown, "create_rule") == MSG_NOT_FOUND
    running = start_job(paths, "记住：提交前先跑测试", session="C")
    assert rejected(paths, store, running, "create_rule") == MSG_NOT_FOUND
    # A superseded proposal cannot be answered from the old popup.
    old = prompted(paths, store, proposal("回答问题时使用中文"), session="A", turn="1")
    prompted(paths, store, proposal("提交代码前先运行全部测试"), session="A", turn="2")
    assert rejected(paths, store, old, "create_rule") == MSG_NOT_FOUND
    assert store.all() == []


def test_concurrent_resolves_apply_once(env) -> None:
    paths, store = env
    sid = prompted(paths, store, proposal("回答问题时使用中文"))
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        try:
            outcomes.append(resolve(paths, MemoryStore(paths), "claude", sid, "create_rule", NOW))
        except ResolveRejected as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(MSG_NOT_FOUND) == 3 and len(store.all()) == 1
