"""Both modes end to end through the real hook entry (``python -I -S memself/hooks/entry.py``):
prompt hook -> detached judge against the fake server -> Stop hook output ->
memory_resolve over a real MCP stdio session -> the memory in the store."""

from __future__ import annotations

import json
import re
import time

import anyio
import pytest

from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.judge import jobs
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.hookproc import hook_data, run_entry
from tests.support.judge_helpers import API_KEY, configure
from tests.support.judge_server import remember, running_judge, sse
from tests.support.mcp_client import session_calls, text_of

__all__ = ["hook_data"]

PROMPT = "记住：以后回答都用中文"


def payload(host: str, kind: EventKind, session: str, **extra: object) -> bytes:
    data = {
        "hook_event_name": HOSTS[host].EVENT_NAMES[kind],
        "session_id": session,
        "conversation_id": session,
        "cwd": "/tmp",
        **extra,
    }
    return json.dumps(data, ensure_ascii=False).encode()


def prompt_hook(host: str, session: str, prompt: str, turn: str) -> dict | None:
    extra = {"prompt": prompt, "user_prompt": prompt, "prompt_id": turn, "generation_id": turn}
    proc = run_entry(host, payload(host, EventKind.PROMPT_SUBMIT, session, **extra))
    assert proc.rc == 0, proc.stderr[-2000:]
    return proc.answer()


def stop_hook(host: str, session: str) -> dict | None:
    extra = {"stop_hook_active": False, "status": "completed", "loop_count": 0}
    proc = run_entry(host, payload(host, EventKind.STOP, session, **extra), timeout=60)
    assert proc.rc == 0, proc.stderr[-2000:]
    return proc.answer()


def wait_for_judge(paths: DataPaths) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [jobs.read_job(p) for p in paths.side_dir.glob("s_*.json")]
        if found and all(j and j["status"] != "running" for j in found):
            assert len(found) == 1
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no finished judge job")


@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "direct"])
def test_claude_end_to_end(hook_data: DataPaths, confirm: bool) -> None:
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm)
        judge.script(sse(remember("回答问题时一律使用中文", "rule", "以后回答都用中文")))
        prompt_hook("claude", "sess-e2e", PROMPT, "p-1")
        prompt_hook("claude", "sess-e2e", PROMPT, "p-1")  # a retried hook: no second judge
        job = wait_for_judge(paths)
        assert job["status"] == "ready" and len(judge.requests) == 1
        assert API_KEY not in judge.requests[0].raw
        answer = stop_hook("claude", "sess-e2e")
    assert answer is not None and answer["decision"] == "block"
    reason = answer["reason"]
    assert reason.startswith("memory-self-evolution 捕捉到了新的记忆：")
    assert stop_hook("claude", "sess-e2e") in (None, {})  # shown once, no loop
    if not confirm:
        assert "归类：rule（规则与偏好）" in reason and "不要做其他任何操作" in reason
    else:
        assert "是否落成记忆" in reason and MemoryStore(paths).all() == []
        [sid] = re.findall(r"sessionID：(s_[a-f0-9]{64})", reason)
        assert sid == job["id"]
        _, _, results = anyio.run(
            session_calls, "claude", [("memory_resolve", {"sessionID": sid, "decision": "create_rule"})]
        )
        assert not results[0].is_error, text_of(results[0])
    [memory] = MemoryStore(paths).all()
    assert (memory.text, memory.category, memory.confidence) == ("回答问题时一律使用中文", "rule", 0.5)
    assert API_KEY not in paths.log_file.read_text()


def test_cursor_confirm_round_trip_with_hidden_text(hook_data: DataPaths) -> None:
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        judge.script(sse(remember("支付页新流程的灰度开关是 pay_new_flow", "project")))
        prompt_hook("cursor", "conv-1", "记住：支付页新流程的灰度开关是 pay_new_flow", "gen-1")
        job = wait_for_judge(paths)
        answer = stop_hook("cursor", "conv-1")
        assert set(answer) == {"followup_message"}
        visible = answer["followup_message"]
        assert job["id"] not in visible  # the user-visible text carries no sessionID
        # Cursor submits the follow-up as the next prompt: the hook swaps in the model text.
        restored = prompt_hook("cursor", "conv-1", visible, "gen-2")
        assert len(judge.requests) == 1  # the continuation is neither judged ...
    context = restored["additional_context"]
    assert f"sessionID：{job['id']}" in context and "MEMORY_CONFIRM_V1" in context
    _, _, results = anyio.run(
        session_calls, "cursor", [("memory_resolve", {"sessionID": job["id"], "decision": "create_project"})]
    )
    assert not results[0].is_error, text_of(results[0])
    [memory] = MemoryStore(paths).all()
    assert (memory.category, memory.confidence) == ("project", 0.5)


def test_claude_workspace_scope_from_the_hooks_cwd(hook_data: DataPaths, tmp_path) -> None:
    """A prompt in a repository's subdirectory: the job carries the repository, the popup names
    it, and memory_resolve over MCP writes the fact into it."""
    paths = hook_data
    repo = tmp_path / "pay-service"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    fact = "支付回调的签名校验在 callback/verify.py 里实现"
    cwd = str(repo / "src")
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        judge.script(sse(remember(fact, "project", scope="workspace")))
        extra = {"prompt": f"记住：{fact}", "prompt_id": "p-1", "cwd": cwd}
        proc = run_entry("claude", payload("claude", EventKind.PROMPT_SUBMIT, "sess-ws", **extra))
        assert proc.rc == 0, proc.stderr[-2000:]
        job = wait_for_judge(paths)
        assert job["workspace"] == str(repo) and job["proposal"]["scope"] == "workspace"
        stop_extra = {"stop_hook_active": False, "cwd": cwd}
        proc = run_entry("claude", payload("claude", EventKind.STOP, "sess-ws", **stop_extra), timeout=60)
        assert proc.rc == 0, proc.stderr[-2000:]
    reason = proc.answer()["reason"]
    assert "范围：仅此项目（pay-service）（推荐）" in reason
    assert "→ create_project_here" in reason and "→ create_project_all" in reason
    call = ("memory_resolve", {"sessionID": job["id"], "decision": "create_project_here"})
    _, _, results = anyio.run(session_calls, "claude", [call])
    assert not results[0].is_error, text_of(results[0])
    assert text_of(results[0]).endswith("范围：仅此项目（pay-service）")
    [memory] = MemoryStore(paths).all()
    assert (memory.text, memory.workspace, memory.workspaceName) == (fact, str(repo), "pay-service")
