"""Per-prompt recall in the real clients, with the real offline model in a warm engine: a relevant
project fact reaches the model with the matching prompt, and not with an unrelated one."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from clients import Clients, registered_hook_lines, run_claude, run_codebuddy, write_claude_style_hooks

from memself.config import set_config_value
from memself.engine.client import call_engine, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
FACT = "订单服务的数据库迁移脚本放在 order-svc 仓库的 migrations 目录，执行前要在 #db-change 频道报备"
MARKER = "#db-change"
RELEVANT = "订单服务要加个字段，数据库迁移脚本放在哪，执行前要做什么"
UNRELATED = "讲讲 TCP 的拥塞控制算法，慢启动和拥塞避免有什么区别"


def _setup(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, DataPaths, dict[str, str]]:
    home, proj = tmp_path / "client-home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    data = DataPaths(tmp_path / "memself-data")
    data.ensure()
    monkeypatch.setenv("MEMSELF_HOME", str(data.root))
    monkeypatch.setenv("MEMSELF_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("MEMSELF_ENGINE_SERVICE", raising=False)
    set_config_value(data, "model", "multilingual-e5-small")
    MemoryStore(data).create(FACT, "project", datetime(2026, 11, 1, tzinfo=timezone.utc))
    folder = ".claude" if client == "claude" else ".codebuddy"
    write_claude_style_hooks(home / folder / "settings.json", registered_hook_lines(client), EVENTS)
    return home, proj, data, {"MEMSELF_RUNTIME_DIR": str(runtime)}


def _run(
    client: str, clients: Clients, home: Path, proj: Path, data: DataPaths, env: dict[str, str], prompt: str
):
    if client == "claude":
        return run_claude(clients, home, prompt, cwd=proj, memself_home=data.root, extra_env=env)
    return run_codebuddy(
        clients, home, prompt, cwd=proj, memself_home=data.root, stream_json=False, extra_env=env
    )


@pytest.mark.parametrize("client", ["claude", "codebuddy"])
def test_relevant_fact_reaches_the_model_only_with_the_matching_prompt(
    client: str, clients: Clients, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, proj, data, env = _setup(client, tmp_path, monkeypatch)
    env["MEMSELF_MODEL_CACHE"] = str(model_cache)
    try:
        # A warm engine: the steady state of a working session.
        call_engine(
            data, "recall", {"text": "预热", "now": datetime.now(timezone.utc).isoformat()}, timeout_s=300
        )

        def run(prompt: str):
            return _run(client, clients, home, proj, data, env, prompt)

        relevant = run(RELEVANT)
        assert relevant.rc == 0, relevant.stderr[-2000:]
        assert relevant.bodies_containing(MARKER), "the relevant fact did not reach the model"
        body = json.dumps(relevant.bodies_containing(MARKER)[0]["body"], ensure_ascii=False)
        assert "项目事实" in body
        unrelated = run(UNRELATED)
        assert unrelated.rc == 0 and unrelated.model_requests
        assert not unrelated.bodies_containing(MARKER)
    finally:
        stop_engine(data)


@pytest.mark.parametrize("client", ["claude", "codebuddy"])
def test_first_prompt_against_a_stopped_engine_carries_the_fact(
    client: str, clients: Clients, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first prompt of a working session: the engine exited (idle, or `memself engine stop`).
    The session start starts it, the prompt hook waits for it within its deadline, and the fact
    reaches the model with that very first prompt."""
    home, proj, data, env = _setup(client, tmp_path, monkeypatch)
    env["MEMSELF_MODEL_CACHE"] = str(model_cache)
    try:
        # A user who has used memself before: the index is built; then the engine is stopped.
        call_engine(
            data, "recall", {"text": "预热", "now": datetime.now(timezone.utc).isoformat()}, timeout_s=300
        )
        assert stop_engine(data) is not None
        first = _run(client, clients, home, proj, data, env, RELEVANT)
        assert first.rc == 0, first.stderr[-2000:]
        assert first.bodies_containing(MARKER), "the first prompt got no recall"
    finally:
        stop_engine(data)
