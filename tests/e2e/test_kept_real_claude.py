"""A rule broken in the real Claude Code CLI is named at the session's next prompt.

The store holds the rule 「回答问题时一律使用中文」; the fake Anthropic model answers the first
prompt in English; at Stop the detached check sends the rules and the answer to the fake judge,
which says the rule was broken. The second prompt of the same session carries the one-line
notice to the model, and ``memself stats`` counts the broken rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from clients import Clients, registered_hook_lines, run_claude_turns, write_claude_style_hooks

from memself.cli import main as cli
from memself.kept import counts
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.e2e.test_real_clients import engine_env
from tests.support.hookproc import hook_data

__all__ = ["hook_data"]

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
RULE = "回答问题时一律使用中文"
FIRST, SECOND = "写一个求列表平均值的函数", "再加上类型注解"
ENGLISH = "Sure, here is the function you asked for. It returns 0.0 when the list is empty."
NOTICE = f"记忆提示：上一轮回答没有遵守规则「{RULE}」，本轮请遵守。"
RULES = [
    {"path": "/chat/completions", "contains": ["跨会话长期记忆"], "text": json.dumps({"remember": False})},
    {
        "path": "/chat/completions",
        "contains": ["规则遵守"],
        "text": json.dumps({"broken": [{"id": "r-zh", "sentence": ENGLISH.split(". ")[0] + "."}]}),
    },
    {"path": "/messages", "contains": [FIRST], "excludes": [SECOND], "text": ENGLISH},
]


def test_a_broken_rule_is_named_at_the_next_prompt_and_counted(
    clients: Clients, tmp_path: Path, hook_data: DataPaths
) -> None:
    home, proj = tmp_path / "client-home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    write_claude_style_hooks(home / ".claude" / "settings.json", registered_hook_lines("claude"), EVENTS)
    stamp = "2026-11-30T09:00:00.000Z"
    rule = {
        "id": "r-zh",
        "text": RULE,
        "confidence": 0.8,
        "category": "rule",
        "evidence": "",
        "firstSeen": stamp,
        "lastSeen": stamp,
        "deprecated": False,
        "createdAt": stamp,
    }
    hook_data.group_file("rule").write_text(json.dumps(rule, ensure_ascii=False) + "\n", encoding="utf-8")
    config = {"sideApiBase": "{base}/v1", "sideApiModel": "fake-judge", "confirm": False}
    files = {
        str(hook_data.config): json.dumps(config),
        str(hook_data.side_secret): json.dumps({"apiKey": "sk-judge-e2e", "boundApiBase": "{base}/v1"}),
    }
    run = run_claude_turns(
        clients,
        home,
        [FIRST, SECOND],
        cwd=proj,
        memself_home=hook_data.root,
        idle_s=8.0,
        extra_env={**engine_env(), "MEMSELF_KEPT": "1"},
        files=files,
        rules=RULES,
        timeout=150,
    )
    assert run.rc == 0, run.stderr[-3000:]
    checks = [r for r in run.requests if "规则遵守" in json.dumps(r["body"], ensure_ascii=False)]
    # One request per answered turn; the second answer is checked too, and the scripted verdict
    # quotes a sentence it does not have, so that verdict is ignored.
    assert len(checks) == 2, "one check request per answered turn"
    sent = json.dumps(checks[0]["body"], ensure_ascii=False)
    assert RULE in sent and "returns 0.0 when the list is empty" in sent and "sk-judge-e2e" not in sent
    carrying = run.bodies_containing(NOTICE)
    assert carrying, "the notice never reached the model"
    first_answer = min(r["t"] for r in run.bodies_containing(FIRST))
    assert all(r["t"] > first_answer for r in carrying)
    assert all(SECOND in json.dumps(r["body"], ensure_ascii=False) for r in carrying)
    memory = MemoryStore(hook_data).get("r-zh")
    assert memory is not None and counts.count(memory, counts.BROKEN) == 1
    stats = json.loads(CliRunner().invoke(cli, ["stats", "--json"]).output)
    assert stats["groups"]["rule"]["broken"] == 1
    assert stats["turns"] >= 1 and sum(s["rulesBroken"] for s in stats["workspaces"]) == 1
