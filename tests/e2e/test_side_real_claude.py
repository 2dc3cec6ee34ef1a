"""The side judge in the real Claude Code CLI: 「记住：以后回答都用中文」 ends with that rule stored.

Confirm on: the prompt hook starts the judge (the fake OpenAI endpoint answers as the judge),
Stop continues with MEMORY_CONFIRM_V1, the fake Anthropic model answers that continuation by
calling ``mcp__memory-self-evolution__memory_resolve`` through the real MCP server. Confirm off:
the judge writes the rule itself and Stop only shows the result, with no tool round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clients import Clients, registered_hook_lines, run_claude, write_claude_style_hooks

from memself.install.entries import mcp_command
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.e2e.test_real_clients import engine_env
from tests.support.hookproc import hook_data

__all__ = ["hook_data"]

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
PROMPT = "记住：以后回答都用中文"
RULE = "回答问题时一律使用中文"
TOOL = "mcp__memory-self-evolution__memory_resolve"
JUDGE_RULE = {
    "path": "/chat/completions",
    "contains": ["跨会话长期记忆"],
    "text": json.dumps(
        {"remember": True, "text": RULE, "group": "rule", "evidence": "以后回答都用中文"}, ensure_ascii=False
    ),
}
RESOLVE_RULE = {
    "path": "/messages",
    "scope": "last_message",
    "contains": ["MEMORY_CONFIRM_V1"],
    "capture": {"sessionID": r"sessionID：(s_[a-f0-9]{64})"},
    "tool_use": {"name": TOOL, "input": {"sessionID": "", "decision": "create_rule"}},
}


def setup_home(home: Path, data: DataPaths, confirm: bool) -> dict[str, str]:
    write_claude_style_hooks(home / ".claude" / "settings.json", registered_hook_lines("claude"), EVENTS)
    server = {
        "type": "stdio",
        "command": mcp_command("claude")[0],
        "args": mcp_command("claude")[1:],
        "env": {},
    }
    (home / ".claude.json").write_text(
        json.dumps({"mcpServers": {"memory-self-evolution": server}}), encoding="utf-8"
    )
    config = {"sideApiBase": "{base}/v1", "sideApiModel": "fake-judge", "confirm": confirm}
    return {
        str(data.config): json.dumps(config),
        str(data.side_secret): json.dumps({"apiKey": "sk-judge-e2e", "boundApiBase": "{base}/v1"}),
    }


@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "direct"])
def test_remember_chinese_in_real_claude(
    confirm: bool, clients: Clients, tmp_path: Path, hook_data: DataPaths
) -> None:
    home, proj = tmp_path / "client-home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    files = setup_home(home, hook_data, confirm)
    run = run_claude(
        clients,
        home,
        PROMPT,
        cwd=proj,
        memself_home=hook_data.root,
        extra_args=["--allowedTools", TOOL],
        extra_env={**engine_env(), "ENABLE_TOOL_SEARCH": "false"},
        files=files,
        rules=[JUDGE_RULE, RESOLVE_RULE],
        timeout=150,
    )
    assert run.rc == 0, run.stderr[-3000:]
    judge_calls = [r for r in run.requests if r["path"].endswith("/chat/completions")]
    assert len(judge_calls) == 1
    assert "sk-judge-e2e" not in json.dumps(judge_calls[0]["body"])
    # (Every prompt's reminder names MEMORY_CONFIRM_V1 too; look for the continuation's own words.)
    marker = "是否落成记忆" if confirm else "插件已直接写入记忆"
    continuation = run.bodies_containing(marker)
    assert continuation, "the Stop continuation never reached the model"
    tool_results = [r for r in run.model_requests if '"tool_result"' in json.dumps(r["body"])]
    if confirm:
        assert tool_results, "the model's memory_resolve call never came back"
        body = json.dumps(tool_results[-1]["body"], ensure_ascii=False)
        assert f"生成了一条记忆：{RULE}。归类：rule（规则与偏好）" in body
    else:
        assert not tool_results
        body = json.dumps(continuation[0]["body"], ensure_ascii=False)
        assert f'新增了一条记忆：\\"{RULE}\\"。归类：rule（规则与偏好）' in body
    [memory] = MemoryStore(hook_data).all()
    assert (memory.text, memory.category, memory.confidence) == (RULE, "rule", 0.5)
