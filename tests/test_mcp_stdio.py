"""A real MCP stdio session with `memself mcp --agent HOST`, and both modes end to end:
prompt -> detached judge against the fake server -> Stop -> memory_resolve over MCP -> store."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

import pytest

from memself.config import load_config
from memself.hosts import HOSTS
from memself.judge import jobs
from memself.judge.followup import followup
from memself.judge.start import maybe_start_judge
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import configure
from tests.support.judge_server import remember, running_judge, sse
from tests.support.mcp_client import run, text_of


def test_server_identity_tools_and_missing_session_checklist_20() -> None:
    paths = DataPaths.default()
    init, tools, results = run(
        "claude",
        [
            ("memory_list", {}),
            ("memory_resolve", {"sessionID": "s_" + "a" * 64, "decision": "create_rule"}),
            ("memory_read", {"group": "team"}),
            ("memory_propose", {"text": "x"}),
        ],
    )
    assert init.server_info.name == "memory-self-evolution"
    assert [t.name for t in tools] == [
        "memory_list",
        "memory_read",
        "memory_update",
        "memory_resolve",
        "memory_config",
    ]
    resolve_tool = next(t for t in tools if t.name == "memory_resolve")
    assert resolve_tool.input_schema["required"] == ["sessionID", "decision"]
    listed, missing, bad_group, unknown = results
    assert text_of(listed) == "记忆库为空" and not listed.is_error
    assert missing.is_error and "未找到可处理的记忆分析会话" in text_of(missing)
    assert text_of(bad_group) == "执行失败：参数 group 必须是 rule 或 project"
    assert unknown.is_error
    assert not paths.side_dir.exists()


def test_unknown_agent_refused() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "memself", "mcp", "--agent", "vscode"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "vscode" in done.stderr


def wait_done(paths: DataPaths, sid: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = jobs.load_job(paths, sid)
        if job["status"] != "running":
            return job
        time.sleep(0.1)
    raise AssertionError("judge did not finish")


@pytest.mark.parametrize("confirm", [True, False])
def test_end_to_end_both_modes(confirm: bool) -> None:
    paths = DataPaths.default()
    now = datetime.now(timezone.utc)
    with running_judge() as judge:
        configure(paths, judge.url, confirm)
        judge.script(sse(remember("回答问题时一律使用中文", "rule", "以后回答都用中文")))
        sid = maybe_start_judge(
            paths, load_config(paths), "claude", "sess-e2e", "prompt-1", "记住：以后回答都用中文", now
        )
        assert sid is not None
        wait_done(paths, sid)
        store = MemoryStore(paths)
        result = followup(
            paths,
            store,
            load_config(paths),
            "claude",
            "sess-e2e",
            HOSTS["claude"].POPUP,
            lambda: datetime.now(timezone.utc),
        )
    assert result is not None
    visible, model = result
    if not confirm:
        [memory] = store.all()
        assert (memory.text, memory.category, memory.confidence) == ("回答问题时一律使用中文", "rule", 0.5)
        assert "归类：rule（规则与偏好）" in visible and "不要做其他任何操作" in model
        return
    assert store.all() == [] and f"sessionID：{sid}" in model and "是否落成记忆" in model
    _, _, results = run("cursor", [("memory_resolve", {"sessionID": sid, "decision": "create_rule"})])
    assert results[0].is_error  # another host's MCP server cannot resolve it
    _, _, results = run(
        "claude",
        [
            ("memory_resolve", {"sessionID": sid, "decision": "create_rule"}),
            ("memory_resolve", {"sessionID": sid, "decision": "create_rule"}),
        ],
    )
    first, second = results
    assert not first.is_error
    assert text_of(first) == "生成了一条记忆：回答问题时一律使用中文。归类：rule（规则与偏好）"
    assert second.is_error and "未找到可处理的记忆分析会话" in text_of(second)
    [memory] = MemoryStore(paths).all()
    assert (memory.text, memory.category, memory.confidence) == ("回答问题时一律使用中文", "rule", 0.5)
