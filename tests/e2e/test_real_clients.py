"""The real Claude Code and CodeBuddy Code CLIs, driven against a fake model API on 127.0.0.1,
with memself's hooks registered in a temp home: what the hooks answer must reach the model.

Run with ``pytest -m e2e tests/e2e`` (excluded from the default run; npm must be reachable the
first time, the clients are cached in ``.cache/npm-clients``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import (
    ClientRun,
    Clients,
    hook_command_line,
    registered_hook_lines,
    run_claude,
    run_codebuddy,
    write_claude_style_hooks,
)

from memself.engine.client import stop_engine
from memself.hook.command import hook_command
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from tests.support.hookproc import hook_data

__all__ = ["hook_data"]

pytestmark = pytest.mark.e2e

EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 20}
START, PROMPT, STOP, VISIBLE = "START-CTX-5f1d", "PROMPT-CTX-8c2e", "STOP-MODEL-3b7a", "STOP-SEEN-9e4c"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[dict[str, Path]]:
    paths = {
        "home": tmp_path / "client-home",
        "proj": tmp_path / "proj",
        "memself": tmp_path / "memself-data",
        "replies": tmp_path / "replies.json",
    }
    for key in ("home", "proj"):
        paths[key].mkdir()
    yield paths
    # The real entry starts a warm engine for the client's data dir: do not leave it running.
    stop_engine(DataPaths(paths["memself"]))


def scripted(workspace: dict[str, Path], stop: dict | None) -> None:
    replies = {"session_start": {"context": START}, "prompt_submit": {"context": PROMPT}}
    if stop is not None:
        replies["stop"] = stop
    workspace["replies"].write_text(json.dumps(replies), encoding="utf-8")


def events(workspace: dict[str, Path]) -> list[dict]:
    path = Path(str(workspace["replies"]) + ".events")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def hook_runs(memself_home: Path) -> list[dict]:
    """The hook-run lines our real entry logged (one per hook process)."""
    log = memself_home / "memself.log"
    runs = []
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else []:
        if " hook-run " in line:
            runs.append(json.loads(line.split(" hook-run ", 1)[1]))
    return runs


def assert_injected_then_one_continuation(run: ClientRun, baseline: ClientRun) -> None:
    assert run.rc == 0 and baseline.rc == 0, (run.stderr[-2000:], baseline.stderr[-2000:])
    base = baseline.model_requests
    assert base, "the client made no model request"
    assert all(START in json.dumps(r["body"]) and PROMPT in json.dumps(r["body"]) for r in base)
    assert not baseline.bodies_containing(STOP)
    # The Stop continuation adds exactly one request, and it carries the continuation text.
    assert len(run.model_requests) == len(base) + 1
    assert len(run.bodies_containing(STOP)) == 1
    assert run.model_requests[-1] is run.bodies_containing(STOP)[0]
    assert run.bodies_containing(VISIBLE) == run.bodies_containing(STOP)


# --- Claude Code ------------------------------------------------------------------------------


def test_claude_real_entry_fires_on_every_event(clients: Clients, workspace) -> None:
    write_claude_style_hooks(
        workspace["home"] / ".claude" / "settings.json", registered_hook_lines("claude"), EVENTS
    )
    run = run_claude(
        clients, workspace["home"], "hello", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    assert run.rc == 0, run.stderr[-2000:]
    assert run.model_requests
    kinds = [r["kind"] for r in hook_runs(workspace["memself"]) if r["host"] == "claude"]
    assert kinds[:2] in (["session_start", "prompt_submit"], ["prompt_submit", "session_start"])
    assert "stop" in kinds
    # The registered command is the one installers write: absolute, -I -S, our entry.
    settings = json.loads((workspace["home"] / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.split() == hook_command("claude", EventKind.STOP)


def test_claude_injection_reaches_the_model_and_stop_continues_once(clients: Clients, workspace) -> None:
    settings = workspace["home"] / ".claude" / "settings.json"
    write_claude_style_hooks(settings, hook_command_line("claude", workspace["replies"]), EVENTS)
    scripted(workspace, stop=None)
    baseline = run_claude(
        clients, workspace["home"], "hello", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    Path(str(workspace["replies"]) + ".events").unlink()
    scripted(workspace, stop={"continuation": STOP, "visible": VISIBLE})
    run = run_claude(
        clients, workspace["home"], "hello", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    assert_injected_then_one_continuation(run, baseline)
    stops = [e for e in events(workspace) if e["kind"] == "stop"]
    # The continuation's own Stop arrives with stop_hook_active and gets no second block.
    assert [s["stop_active"] for s in stops] == [False, True]
    prompt = next(e for e in events(workspace) if e["kind"] == "prompt_submit")
    assert prompt["prompt"] == "hello" and prompt["turn_id"] and prompt["session_key"]


def test_claude_hook_steps_aside_under_cursor(clients: Clients, workspace) -> None:
    """Item 7: Cursor runs ~/.claude hooks too; with Cursor's own hook installed, ours is silent."""
    home = workspace["home"]
    write_claude_style_hooks(
        home / ".claude" / "settings.json", hook_command_line("claude", workspace["replies"]), EVENTS
    )
    (home / ".cursor").mkdir()
    (home / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"stop": [{"command": hook_command_line("cursor")}]}})
    )
    scripted(workspace, stop={"continuation": STOP, "visible": VISIBLE})
    # CURSOR_VERSION is what Cursor sets in its hook environment; the client passes it on.
    run = run_claude(
        clients,
        home,
        "hello",
        cwd=workspace["proj"],
        memself_home=workspace["memself"],
        extra_env={"CURSOR_VERSION": "3.20.17"},
    )
    assert run.rc == 0 and len(run.model_requests) == 1
    assert not run.bodies_containing(START) and not run.bodies_containing(STOP)
    assert events(workspace) == []  # the core was never asked
    notes = {r.get("note") for r in hook_runs(workspace["memself"])}
    assert notes == {"stepped-aside"}


# --- CodeBuddy Code ---------------------------------------------------------------------------


def test_codebuddy_real_entry_fires_on_every_event(clients: Clients, workspace) -> None:
    write_claude_style_hooks(
        workspace["home"] / ".codebuddy" / "settings.json", registered_hook_lines("codebuddy"), EVENTS
    )
    run = run_codebuddy(
        clients,
        workspace["home"],
        "hello",
        cwd=workspace["proj"],
        memself_home=workspace["memself"],
        stream_json=False,
    )
    assert run.rc == 0, run.stderr[-2000:]
    assert run.model_requests
    kinds = {r["kind"] for r in hook_runs(workspace["memself"]) if r["host"] == "codebuddy"}
    assert {"session_start", "prompt_submit", "stop"} <= kinds


def test_codebuddy_injection_reaches_the_model_and_stop_continues_once(clients: Clients, workspace) -> None:
    settings = workspace["home"] / ".codebuddy" / "settings.json"
    write_claude_style_hooks(settings, hook_command_line("codebuddy", workspace["replies"]), EVENTS)
    scripted(workspace, stop=None)
    baseline = run_codebuddy(
        clients, workspace["home"], "hello", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    Path(str(workspace["replies"]) + ".events").unlink()
    scripted(workspace, stop={"continuation": STOP, "visible": VISIBLE, "once": True})
    run = run_codebuddy(
        clients, workspace["home"], "hello", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    assert_injected_then_one_continuation(run, baseline)
    seen = events(workspace)
    assert [s["stop_active"] for s in seen if s["kind"] == "stop"] == [False, True]
    # CodeBuddy fires UserPromptSubmit again with the continuation as the prompt (newlines
    # removed there, kept in the model message): the core must recognise its own text.
    prompts = [e["prompt"] for e in seen if e["kind"] == "prompt_submit"]
    assert prompts[0] == "hello" and prompts[1].startswith("Stop hook: ") and STOP in prompts[1]


# --- the real core: rules injected at session start reach the model -----------------------------

RULE = "E2E-RULE-7d41：回答一律使用简体中文"


def seed_rule(paths: DataPaths) -> None:
    seen = "2026-11-29T08:00:00.000Z"
    record = {
        "id": "mem-e2e-rule-1",
        "text": RULE,
        "confidence": 0.9,
        "category": "rule",
        "evidence": "e2e",
        "firstSeen": seen,
        "lastSeen": seen,
        "deprecated": False,
        "createdAt": seen,
    }
    paths.group_file("rule").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")


def engine_env() -> dict[str, str]:
    """Engines spawned by the hooks host the small test service (hook_data stops them)."""
    import os

    return {key: os.environ[key] for key in ("MEMSELF_RUNTIME_DIR", "MEMSELF_ENGINE_SERVICE", "PYTHONPATH")}


@pytest.mark.parametrize("client", ["claude", "codebuddy"])
def test_session_start_rules_reach_the_model(
    client: str, clients: Clients, workspace, hook_data: DataPaths
) -> None:
    seed_rule(hook_data)
    folder = ".claude" if client == "claude" else ".codebuddy"
    write_claude_style_hooks(
        workspace["home"] / folder / "settings.json", registered_hook_lines(client), EVENTS
    )

    def run() -> ClientRun:
        if client == "claude":
            return run_claude(
                clients,
                workspace["home"],
                "你好",
                cwd=workspace["proj"],
                memself_home=hook_data.root,
                extra_env=engine_env(),
            )
        return run_codebuddy(
            clients,
            workspace["home"],
            "你好",
            cwd=workspace["proj"],
            memself_home=hook_data.root,
            stream_json=False,
            extra_env=engine_env(),
        )

    enabled = run()
    assert enabled.rc == 0, enabled.stderr[-2000:]
    assert enabled.model_requests
    assert all(RULE in json.dumps(r["body"], ensure_ascii=False) for r in enabled.model_requests)
    runs = [r for r in hook_runs(hook_data.root) if r["host"] == client]
    assert all("error" not in r for r in runs), runs
    hook_data.config.write_text(json.dumps({"enabled": False}), encoding="utf-8")
    disabled = run()
    assert disabled.rc == 0 and disabled.model_requests
    assert not disabled.bodies_containing(RULE)
