"""Delete, merge, replace and move as the CLI and MCP ask for them: each ends the pending proposals aimed
at the memories it changed, and leaves every other proposal alone."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest

from memself import edits as memories
from memself.judge import jobs
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import NOW, configure, proposal, ready, stop


@pytest.fixture
def env() -> tuple[DataPaths, MemoryStore]:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", True)
    return paths, MemoryStore(paths)


def shown(paths: DataPaths, store: MemoryStore, prop: dict, session: str) -> str:
    """A proposal in an open popup of its own session."""
    sid = ready(paths, f"记住：{prop['text']}", prop, session=session)
    assert stop(paths, store, session=session) is not None
    return sid


def reason(paths: DataPaths, sid: str) -> tuple[str, str]:
    job = jobs.load_job(paths, sid)
    return job["status"], job.get("reason", "")


def test_a_move_ends_the_proposals_aimed_at_it_and_a_non_move_ends_none(env) -> None:
    from memself.store.workspaces import Workspace

    paths, store = env
    target = store.create("回答问题时一律使用中文", "rule", NOW - timedelta(days=3))
    aimed = shown(paths, store, proposal("回答时使用中文", "reinforce", target=target), "a")
    same = memories.move(store, target.id, None, NOW)
    assert not same.changed and same.invalidated == 0 and reason(paths, aimed) == ("ready", "")
    moved = memories.move(store, target.id, Workspace("/srv/pay", "pay"), NOW)
    assert moved.changed and moved.previous == "" and moved.memory.workspace == "/srv/pay"
    assert moved.invalidated == 1 and reason(paths, aimed) == ("none", "target-changed")


def test_invalidate_proposals_ends_only_those_aimed_at_the_ids(env) -> None:
    paths, store = env
    target = store.create("回答问题时一律使用中文", "rule", NOW - timedelta(days=3))
    aimed = shown(paths, store, proposal("回答时使用中文", "reinforce", target=target), "a")
    other = shown(paths, store, proposal("提交代码前先运行全部测试"), "b")
    assert memories.invalidate_proposals(paths, [target.id], NOW) == 1
    assert reason(paths, aimed) == ("none", "target-changed")
    assert reason(paths, other) == ("ready", "")
    assert memories.invalidate_proposals(paths, [target.id], NOW) == 0  # ended once
    assert memories.invalidate_proposals(paths, [], NOW) == 0


def test_delete_merge_replace_each_end_the_proposals_they_make_stale(env) -> None:
    paths, store = env
    old = NOW - timedelta(days=3)
    gone = store.create("缩进统一用 2 个空格", "project", old)
    keep = store.create("git 提交信息使用英文", "rule", old)
    drop = store.create("提交信息遵循 Conventional Commits", "rule", old)
    rewritten = store.create("回答问题时一律使用中文", "rule", old)
    untouched = store.create("改完代码不要自动 commit", "rule", old)
    sids = {
        m.id: shown(paths, store, proposal(f"{m.text}（新说法）", "reinforce", target=m), m.id)
        for m in (gone, keep, drop, rewritten, untouched)
    }

    deleted = memories.delete(store, [gone.id, "mem-nope"], NOW)
    assert [m.id for m in deleted.removed] == [gone.id] and deleted.invalidated == 1
    merged = memories.merge(store, keep.id, drop.id, "git 提交信息使用英文并遵循 Conventional Commits", NOW)
    assert merged.change.memory.id == keep.id and merged.invalidated == 2
    replaced = memories.replace(store, rewritten.id, "回答问题时一律使用简体中文", NOW)
    assert replaced.change.previous_text == "回答问题时一律使用中文" and replaced.invalidated == 1

    for mem in (gone, keep, drop, rewritten):
        assert reason(paths, sids[mem.id]) == ("none", "target-changed"), mem.text
    assert reason(paths, sids[untouched.id]) == ("ready", "")


def test_cli_delete_ends_the_proposal_aimed_at_it(env) -> None:
    paths, store = env
    target = store.create("回答问题时一律使用中文", "rule", NOW - timedelta(days=3))
    sid = shown(paths, store, proposal("回答时使用中文", "reinforce", target=target), "a")
    done = subprocess.run(
        [sys.executable, "-m", "memself", "delete", target.id],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    assert reason(paths, sid) == ("none", "target-changed")
