"""A ``<private>`` span in a prompt to the real Claude Code CLI: the client's own model gets the
whole prompt (that is the client's), the judge endpoint gets the prompt without the span, and the
span's marker is in no file of memself's data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clients import Clients, run_claude

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.e2e.test_real_clients import engine_env
from tests.e2e.test_side_real_claude import RULE, setup_home
from tests.support.hookproc import hook_data

__all__ = ["hook_data"]

pytestmark = pytest.mark.e2e

MARKER = "PurpleOctopusQuartz"
PROMPT = f"记住：以后回答都用中文 ＜Private＞我的内网密码是 {MARKER}＜/private＞ 谢谢"
JUDGE_RULE = {
    "path": "/chat/completions",
    "contains": ["跨会话长期记忆"],
    "text": json.dumps(
        {"remember": True, "text": RULE, "group": "rule", "evidence": "以后回答都用中文"}, ensure_ascii=False
    ),
}


def test_private_span_never_reaches_the_judge(clients: Clients, tmp_path: Path, hook_data: DataPaths) -> None:
    home, proj = tmp_path / "client-home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    files = setup_home(home, hook_data, confirm=False)
    run = run_claude(
        clients,
        home,
        PROMPT,
        cwd=proj,
        memself_home=hook_data.root,
        extra_env={**engine_env(), "ENABLE_TOOL_SEARCH": "false"},
        files=files,
        rules=[JUDGE_RULE],
        timeout=150,
    )
    assert run.rc == 0, run.stderr[-3000:]
    assert run.bodies_containing(MARKER), "the client's model should have had the whole prompt"
    [judge_call] = [r for r in run.requests if r["path"].endswith("/chat/completions")]
    sent = json.dumps(judge_call["body"], ensure_ascii=False)
    assert "以后回答都用中文" in sent and "谢谢" in sent
    assert MARKER not in sent and "内网密码" not in sent
    for file in (f for f in hook_data.root.rglob("*") if f.is_file()):
        assert MARKER.encode() not in file.read_bytes(), file
    [memory] = MemoryStore(hook_data).all()
    assert memory.text == RULE
