"""The turn's workspace through the judge: sealed in the job, the prompt that asks for a scope,
dedup neighbours only from what the workspace sees, and where a create lands (confirm off),
against a real local HTTP judge and the real store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import pytest

from memself.judge import jobs, prompts
from memself.judge.parse import parse_remember
from memself.judge.resolve import MSG_TAMPERED, ResolveRejected, resolve
from memself.judge.worker import engine_nearest
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.records import Memory
from memself.store.workspaces import Workspace
from tests.support.judge_helpers import NOW, judge, start_job, stop
from tests.support.judge_helpers import judged_data as setup
from tests.support.judge_helpers import run_judge_job as run
from tests.support.judge_server import dedup, remember, sse

__all__ = ["judge"]

PAY = Workspace("/srv/repos/pay-service", "pay-service")
SHOP = Workspace("/srv/repos/web-shop", "web-shop")
FACT = "支付回调的签名校验在 callback/verify.py 里实现"
NEAR = "支付回调签名校验的代码位置是 callback/verify.py"


def system_prompts(judge) -> list[str]:
    return [m["content"] for r in judge.requests for m in r.body["messages"] if m["role"] == "system"]


# --- the job ----------------------------------------------------------------------------------


def test_the_workspace_is_sealed_into_the_job(judge) -> None:
    paths, _ = setup(judge, confirm=True)
    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    job = jobs.load_job(paths, sid)
    assert job is not None and job["workspace"] == PAY.key
    assert not jobs.untrusted(paths, job, "test")
    for forged in ({**job, "workspace": SHOP.key}, {k: v for k, v in job.items() if k != "workspace"}):
        assert jobs.untrusted(paths, forged, "test")


def test_a_turn_without_workspace_writes_no_field_and_adding_one_breaks_the_seal(judge) -> None:
    paths, _ = setup(judge, confirm=True)
    sid = start_job(paths, f"记住：{FACT}")
    job = jobs.load_job(paths, sid)
    assert job is not None and "workspace" not in job
    assert not jobs.untrusted(paths, job, "test")
    assert jobs.untrusted(paths, {**job, "workspace": PAY.key}, "test")


def test_a_job_moved_to_another_workspace_is_never_resolved(judge) -> None:
    paths, store = setup(judge, confirm=True)
    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")))
    assert run(paths, store, sid)["status"] == "ready"
    assert stop(paths, store) is not None
    job = jobs.load_job(paths, sid)
    job["workspace"] = SHOP.key  # the proposal itself is untouched: only where it would land
    jobs.save_job(paths, job)
    with pytest.raises(ResolveRejected) as info:
        resolve(paths, store, "claude", sid, "create_project", NOW)
    assert str(info.value) == MSG_TAMPERED
    assert store.all() == []


# --- the remember prompt and the answer's scope -----------------------------------------------


def test_the_judge_is_asked_for_a_scope_only_when_the_turn_has_a_workspace(judge) -> None:
    paths, store = setup(judge, confirm=True)
    with_ws = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")))
    job = run(paths, store, with_ws)
    assert system_prompts(judge) == [prompts.REMEMBER_SYSTEM_SCOPED]
    assert "scope" in prompts.REMEMBER_SYSTEM_SCOPED and "scope" not in prompts.REMEMBER_SYSTEM
    assert job["proposal"]["scope"] == "workspace"
    # A turn without a workspace: the original's prompt, and a proposal of the original's shape.
    plain_sid = start_job(paths, "记住：以后回答都用中文", turn="turn-2")
    judge.script(sse(remember("回答问题时一律使用中文", "rule", scope="workspace")))
    job = run(paths, store, plain_sid)
    assert system_prompts(judge) == [prompts.REMEMBER_SYSTEM]
    assert "scope" not in job["proposal"]
    # The workspace name never leaves the machine: the judge decides from the words alone.
    assert all(PAY.name not in r.raw for r in judge.requests)


@pytest.mark.parametrize(
    ("said", "group", "expected"),
    [
        (None, "rule", "global"),
        (None, "project", "workspace"),
        ("workspace", "rule", "workspace"),
        ("global", "project", "global"),
        (" Workspace ", "rule", "workspace"),
        (" Team ", "rule", "team"),
        ("everyone", "rule", "global"),
        ("everyone", "project", "workspace"),
        (["workspace"], "project", "workspace"),
        (7, "rule", "global"),
    ],
)
def test_scope_is_read_leniently(said: object, group: str, expected: str) -> None:
    data = {"remember": True, "text": FACT, "group": group}
    if said is not None:
        data["scope"] = said
    answer = parse_remember(json.dumps(data, ensure_ascii=False))
    assert answer is not None and answer.scope == expected


def test_the_scoped_prompts_examples_say_a_scope_per_group() -> None:
    examples = [
        json.loads(line.removeprefix("输出："))
        for line in prompts.REMEMBER_SYSTEM_SCOPED.splitlines()
        if line.startswith('输出：{"remember": true')
    ]
    assert {(e["group"], e["scope"]) for e in examples} == {
        ("rule", "global"),
        ("project", "workspace"),
        ("rule", "workspace"),
    }
    assert all(parse_remember(json.dumps(e, ensure_ascii=False)) is not None for e in examples)


# --- dedup neighbours -------------------------------------------------------------------------


def test_dedup_only_sees_what_the_workspace_sees(judge) -> None:
    paths, store = setup(judge, confirm=False)
    theirs = store.create(FACT, "project", NOW - timedelta(days=2), workspace=SHOP)
    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")))
    job = run(paths, store, sid)
    # web-shop's identical fact is neither a dedup candidate nor a duplicate here.
    assert len(judge.requests) == 1 and job["applied"]
    mine = [m for m in store.all() if m.id != theirs.id]
    assert [(m.text, m.workspace, m.confidence) for m in mine] == [(FACT, PAY.key, 0.5)]
    assert store.get(theirs.id).confidence == theirs.confidence


def test_dedup_targets_global_and_own_memories(judge) -> None:
    paths, store = setup(judge, confirm=False)
    older = store.create(
        "支付回调签名校验的代码位置是 callback/verify.py", "project", NOW - timedelta(days=2)
    )
    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")), sse(dedup("reinforce", older.id)))
    job = run(paths, store, sid)
    assert len(judge.requests) == 2 and older.id in judge.user_messages[1]
    # A reinforce keeps the target's scope: the global memory stays global.
    assert job["proposal"]["action"] == "reinforce"
    [memory] = store.all()
    assert memory.id == older.id and memory.workspace == "" and memory.confidence == 0.6
    assert job["notice"].endswith("归类：project（项目事实），范围：所有项目")


def test_a_neighbour_of_another_workspace_is_dropped_whoever_answers(judge) -> None:
    paths, store = setup(judge, confirm=True)
    theirs = store.create(NEAR, "project", NOW, workspace=SHOP)
    asked: list[str] = []

    def careless(text: str, k: int, workspace: str) -> Sequence[tuple[Memory, float]]:
        asked.append(workspace)
        return [(theirs, 0.97)]

    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")))
    job = run(paths, store, sid, careless)
    assert asked == [PAY.key] and len(judge.requests) == 1
    assert job["proposal"]["action"] == "create" and job["proposal"]["targetId"] == ""


def test_engine_nearest_asks_for_the_workspace_and_checks_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import memself.engine.client as client

    store = MemoryStore(DataPaths.default())
    shared = store.create("回答问题时一律使用中文", "rule", NOW)
    mine = store.create(FACT, "project", NOW, workspace=PAY)
    theirs = store.create("商城首页的轮播图配置在 banner.yaml", "project", NOW, workspace=SHOP)
    calls = []

    def fake(paths_arg, op, payload, timeout_s):
        calls.append(payload)
        ids = [theirs.id, mine.id, shared.id]
        return {"items": [{"id": i, "score": 0.9 - n / 10} for n, i in enumerate(ids)]}

    monkeypatch.setattr(client, "call_engine", fake)
    found = engine_nearest(store)(FACT, 3, PAY.key)
    assert [m.id for m, _ in found] == [mine.id, shared.id]
    assert calls == [{"text": FACT, "k": 3, "workspace": PAY.key}]
    # Nothing the scope sees: the engine is not asked at all.
    only_theirs = MemoryStore(DataPaths.default())
    for memory in (shared, mine):
        only_theirs.delete([memory.id], NOW)
    calls.clear()
    assert engine_nearest(only_theirs)(FACT, 3, PAY.key) == [] and calls == []


# --- confirm off: the judge's scope is used and said ------------------------------------------


@pytest.mark.parametrize(
    ("group", "scope", "landed", "suffix"),
    [
        ("project", "workspace", PAY.key, "归类：project（项目事实），范围：仅此项目（pay-service）"),
        ("rule", "global", "", "归类：rule（规则与偏好），范围：所有项目"),
        ("project", None, PAY.key, "归类：project（项目事实），范围：仅此项目（pay-service）"),
        ("rule", None, "", "归类：rule（规则与偏好），范围：所有项目"),
    ],
)
def test_confirm_off_writes_in_the_judges_scope(judge, group, scope, landed, suffix) -> None:
    paths, store = setup(judge, confirm=False)
    text = FACT if group == "project" else "回答问题时一律使用中文"
    sid = start_job(paths, f"记住：{text}", workspace=PAY.key)
    answer = remember(text, group) if scope is None else remember(text, group, scope=scope)
    judge.script(sse(answer))
    job = run(paths, store, sid)
    [memory] = store.all()
    assert (memory.text, memory.category, memory.workspace) == (text, group, landed)
    assert memory.workspaceName == (PAY.name if landed else "")
    assert job["notice"] == f'记忆插件memory-self-evolution新增了一条记忆："{text}"。{suffix}'
    shown = stop(paths, store)
    assert shown is not None and suffix in shown[0]


def test_confirm_off_without_workspace_is_global_and_says_nothing_new(judge) -> None:
    paths, store = setup(judge, confirm=False)
    sid = start_job(paths, f"记住：{FACT}")
    judge.script(sse(remember(FACT, "project", scope="workspace")))
    job = run(paths, store, sid)
    [memory] = store.all()
    assert memory.workspace == "" and "workspace" not in json.dumps(memory.to_json())
    assert (
        job["notice"] == f'记忆插件memory-self-evolution新增了一条记忆："{FACT}"。归类：project（项目事实）'
    )


def test_a_workspace_create_whose_text_is_global_reinforces_the_global_one(judge) -> None:
    paths, store = setup(judge, confirm=False)
    shared = store.create(FACT, "project", NOW - timedelta(days=2))
    sid = start_job(paths, f"记住：{FACT}", workspace=PAY.key)
    judge.script(sse(remember(FACT, "project", scope="workspace")), sse(dedup("create")))
    job = run(paths, store, sid)
    [memory] = store.all()
    assert memory.id == shared.id and memory.workspace == "" and memory.confidence == 0.6
    assert "没有重复新增" in job["notice"] and job["notice"].endswith("范围：所有项目")
