"""Team memories in the real Claude Code CLI: a repository carrying ``.memself/rule.jsonl`` and
``.memself/project.jsonl`` gets its rule at session start and its fact in recall, marked as the
team's (the real offline model in a warm engine); another repository gets neither, and nothing
is written to the user's store or to the repository."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from clients import ClientRun, Clients, registered_hook_lines, run_claude, write_claude_style_hooks

from memself.config import set_config_value
from memself.engine.client import call_engine, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.e2e.test_workspace_real_claude import anthropic_requests_containing, git_repository

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
RULE = "提交信息一律写中文并带上需求单号 PAY-TEAM-RULE"
FACT = "支付服务的回调验签逻辑在 callback/verify.py 的 verify_signature 函数里"
QUESTION = "支付回调的验签逻辑是在哪个文件哪个函数里实现的？我要改一下验签"


def carry(repo: Path) -> list[Path]:
    folder = repo / ".memself"
    folder.mkdir()
    written = []
    for group, text in (("rule", RULE), ("project", FACT)):
        line = {"id": f"t-{group}", "text": text, "confidence": 0.7, "category": group}
        target = folder / f"{group}.jsonl"
        target.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    return written


def test_team_memories_reach_the_model_in_their_repository_only(
    clients: Clients, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "client-home"
    home.mkdir()
    pay = git_repository(tmp_path / "repos" / "pay-service")
    shop = git_repository(tmp_path / "repos" / "web-shop")
    carried = carry(pay)
    before = [p.read_bytes() for p in carried]
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    data = DataPaths(tmp_path / "memself-data")
    data.ensure()
    monkeypatch.setenv("MEMSELF_HOME", str(data.root))
    monkeypatch.setenv("MEMSELF_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("MEMSELF_ENGINE_SERVICE", raising=False)
    set_config_value(data, "model", "multilingual-e5-small")
    write_claude_style_hooks(home / ".claude" / "settings.json", registered_hook_lines("claude"), EVENTS)
    env = {"MEMSELF_RUNTIME_DIR": str(runtime), "MEMSELF_MODEL_CACHE": str(model_cache)}

    def session(cwd: Path) -> ClientRun:
        run = run_claude(clients, home, QUESTION, cwd=cwd, memself_home=data.root, extra_env=env)
        assert run.rc == 0, run.stderr[-3000:]
        return run

    try:
        call_engine(
            data, "recall", {"text": "预热", "now": datetime.now(timezone.utc).isoformat()}, timeout_s=300
        )
        here = session(pay)
        assert anthropic_requests_containing(here, "## 团队规则"), "no team rules at session start"
        assert anthropic_requests_containing(here, RULE)
        assert anthropic_requests_containing(here, f"［团队］{FACT}"), "the team fact was not recalled"
        elsewhere = session(shop)
        assert anthropic_requests_containing(elsewhere, "验签"), "the question never reached the model"
        assert not anthropic_requests_containing(elsewhere, "PAY-TEAM-RULE")
        assert not anthropic_requests_containing(elsewhere, "verify_signature")
    finally:
        stop_engine(data)
    assert [p.read_bytes() for p in carried] == before
    assert MemoryStore(data).all() == []
