"""Workspaces in the real Claude Code CLI: a project fact stated in one repository is learnt for
that repository only.

Session 1, in ``pay-service``: the user states a fact; the judge (the fake OpenAI endpoint on
127.0.0.1, confirm off) answers it as a project fact of scope ``workspace``, and the detached
judge writes it into that repository's workspace. Session 2, again in ``pay-service``: a question
about it gets the fact recalled into the model's request (the real offline model in a warm
engine). Session 3, in ``web-shop``: the same question, and the fact never reaches the model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from clients import ClientRun, Clients, registered_hook_lines, run_claude, write_claude_style_hooks

from memself.config import set_config_value
from memself.engine.client import call_engine, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
FACT = "支付服务的回调验签逻辑在 callback/verify.py 的 verify_signature 函数里"
MARKER = "verify_signature"
STATEMENT = f"记住：{FACT}"
QUESTION = "支付回调的验签逻辑是在哪个文件哪个函数里实现的？我要改一下验签"
JUDGE_FACT = {
    "path": "/chat/completions",
    "contains": ["跨会话长期记忆", "scope", STATEMENT],
    "text": json.dumps(
        {"remember": True, "text": FACT, "group": "project", "scope": "workspace", "evidence": FACT},
        ensure_ascii=False,
    ),
}


def git_repository(path: Path) -> Path:
    path.mkdir(parents=True)
    git = shutil.which("git")
    if git:
        subprocess.run([git, "init", "-q", str(path)], check=True, capture_output=True)
    else:  # what workspace detection reads: a .git directory at the root
        (path / ".git").mkdir()
    return path


def anthropic_requests_containing(run: ClientRun, needle: str) -> list[dict]:
    return [r for r in run.bodies_containing(needle) if r["path"].split("?")[0].endswith("/messages")]


def test_a_fact_learnt_in_one_repository_is_recalled_there_only(
    clients: Clients, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "client-home"
    home.mkdir()
    pay = git_repository(tmp_path / "repos" / "pay-service")
    shop = git_repository(tmp_path / "repos" / "web-shop")
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
    config = {
        "sideApiBase": "{base}/v1",
        "sideApiModel": "fake-judge",
        "confirm": False,
        "model": "multilingual-e5-small",
    }
    files = {
        str(data.config): json.dumps(config),
        str(data.side_secret): json.dumps({"apiKey": "sk-judge-e2e", "boundApiBase": "{base}/v1"}),
    }

    def session(cwd: Path, prompt: str, rules: list[dict]) -> ClientRun:
        run = run_claude(
            clients, home, prompt, cwd=cwd, memself_home=data.root, extra_env=env, files=files, rules=rules
        )
        assert run.rc == 0, run.stderr[-3000:]
        return run

    try:
        # No engine yet: the hooks start one, and the judge is spawned from inside the client's
        # network namespace, where the fake judge endpoint is.
        learnt = session(pay, STATEMENT, [JUDGE_FACT])
        judge_calls = [r for r in learnt.model_requests if r["path"].endswith("/chat/completions")]
        assert len(judge_calls) == 1, "the judge was not asked exactly once"
        [memory] = MemoryStore(data).all()
        assert (memory.text, memory.category) == (FACT, "project")
        assert (memory.workspace, memory.workspaceName) == (str(pay), "pay-service")
        # Stop showed the written fact with its scope (confirm off: no popup, no tool round).
        shown = learnt.bodies_containing("插件已直接写入记忆")
        assert shown, "the Stop continuation never reached the model"
        assert "范围：仅此项目（pay-service）" in json.dumps(shown[0]["body"], ensure_ascii=False)

        # A warm engine with the new fact indexed: the steady state of a working session.
        now = datetime.now(timezone.utc).isoformat()
        call_engine(data, "recall", {"text": "预热", "now": now}, timeout_s=300)

        here = session(pay, QUESTION, [])
        assert anthropic_requests_containing(here, MARKER), "the fact was not recalled in its repository"

        elsewhere = session(shop, QUESTION, [])
        assert anthropic_requests_containing(elsewhere, "验签"), "the question never reached the model"
        assert not anthropic_requests_containing(elsewhere, MARKER), "the fact leaked into another repository"
        # Nothing new was learnt from the questions: the fake judge answered neither.
        assert [m.id for m in MemoryStore(data).all()] == [memory.id]
    finally:
        stop_engine(data)
