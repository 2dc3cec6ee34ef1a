"""``memself setup --only HOST`` without a terminal, then the real client sees memself: the MCP
server is listed as connected and a run's model request carries the user's rule, injected by the
hooks setup registered. Then ``memself uninstall --only HOST`` takes both away again.

Setup runs as a user's would: the model hub is unreachable here, so it must fall back to the
offline model by itself (the shared expanded copy in ``.cache/models`` saves the 6 s expansion).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import Clients, _base_env, run_claude, run_codebuddy

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RULE = "回答问题时统一使用简体中文，代码注释保持英文 RULE-7c41"
SERVER = "memory-self-evolution"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[dict[str, Path]]:
    paths = {
        "home": tmp_path / "client-home",
        "proj": tmp_path / "proj",
        "memself": tmp_path / "memself-data",
    }
    for path in paths.values():
        path.mkdir()
    record = {
        "id": "r-e2e-1",
        "text": RULE,
        "confidence": 0.8,
        "category": "rule",
        "evidence": "",
        "firstSeen": "2026-11-01T00:00:00.000Z",
        "lastSeen": "2026-11-29T00:00:00.000Z",
        "deprecated": False,
        "createdAt": "2026-11-01T00:00:00.000Z",
    }
    (paths["memself"] / "rule.jsonl").write_text(
        json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    yield paths
    # The hooks started a recall engine for this data directory; leave no process behind.
    memself(paths, env_for(paths), "engine", "stop")


def env_for(ws: dict[str, Path], **extra: str) -> dict[str, str]:
    env = _base_env(ws["home"], ws["memself"]) | {
        "MEMSELF_MODEL_CACHE": str(REPO / ".cache" / "models"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CODEBUDDY_SKIP_BUILTIN_MARKETPLACE": "1",
    }
    (ws["home"] / "tmp").mkdir(exist_ok=True)
    return env | extra


def memself(ws: dict[str, Path], env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    # stdin is not a terminal: setup must ask nothing.
    return subprocess.run(
        [sys.executable, "-m", "memself", *args],
        env=env,
        cwd=ws["proj"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )


def client(argv: list[str], ws: dict[str, Path], env: dict[str, str]) -> str:
    done = subprocess.run(
        argv, env=env, cwd=ws["proj"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
    )
    return done.stdout + done.stderr


def test_claude_setup_only_then_mcp_connected_and_hooks_inject(clients: Clients, workspace) -> None:
    env = env_for(workspace, MEMORY_CLAUDE_BIN=clients.claude[0])
    done = memself(workspace, env, "setup", "--only", "claude")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "已通过 claude mcp add 注册" in done.stdout
    assert "离线模型 multilingual-e5-small" in done.stdout  # the hub is unreachable here
    settings = json.loads((workspace["home"] / ".claude" / "settings.json").read_text())
    assert sorted(settings["hooks"]) == ["SessionStart", "Stop", "UserPromptSubmit"]
    assert "permissions" not in settings  # no terminal, so the permission was not asked

    listed = client([*clients.claude, "mcp", "list"], workspace, env)
    line = next((ln for ln in listed.splitlines() if ln.startswith(SERVER)), "")
    assert "Connected" in line, listed

    run = run_claude(
        clients, workspace["home"], "你好", cwd=workspace["proj"], memself_home=workspace["memself"]
    )
    assert run.rc == 0, run.stderr[-2000:]
    assert run.bodies_containing("RULE-7c41"), "the rule did not reach the model"

    # Idempotent: a second setup changes nothing and registers nothing twice.
    again = memself(workspace, env, "setup", "--only", "claude")
    assert again.returncode == 0 and "已新建" not in again.stdout
    assert "已注册，无需改动" in again.stdout

    gone = memself(workspace, env, "uninstall", "--only", "claude")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert SERVER not in client([*clients.claude, "mcp", "list"], workspace, env)
    assert not (workspace["home"] / ".claude" / "settings.json").exists()


def test_codebuddy_setup_only_then_mcp_connected_and_hooks_inject(clients: Clients, workspace) -> None:
    env = env_for(workspace)
    done = memself(workspace, env, "setup", "--only", "codebuddy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace["home"] / ".codebuddy" / ".mcp.json").exists()

    listed = client([*clients.codebuddy, "mcp", "list"], workspace, env)
    line = next((ln for ln in listed.splitlines() if ln.startswith(SERVER)), "")
    assert "Connected" in line, listed

    run = run_codebuddy(
        clients,
        workspace["home"],
        "你好",
        cwd=workspace["proj"],
        memself_home=workspace["memself"],
        stream_json=False,
    )
    assert run.rc == 0, run.stderr[-2000:]
    assert run.bodies_containing("RULE-7c41"), "the rule did not reach the model"

    gone = memself(workspace, env, "uninstall", "--only", "codebuddy")
    assert gone.returncode == 0
    assert SERVER not in client([*clients.codebuddy, "mcp", "list"], workspace, env)


def _listed(clients: Clients, ws: dict[str, Path], env: dict[str, str]) -> dict[str, str]:
    """``codebuddy mcp list``: server name -> its status line."""
    listed = client([*clients.codebuddy, "mcp", "list"], ws, env)
    return {ln.split(":", 1)[0]: ln for ln in listed.splitlines() if ": " in ln and " - " in ln}


def test_codebuddy_users_own_servers_in_mcp_json_stay_visible(clients: Clients, workspace) -> None:
    """The original registered in ``~/.codebuddy/mcp.json``, where users keep servers of their
    own. The CLI reads the first of ``.mcp.json`` and ``mcp.json`` that exists: memself must
    register in ``mcp.json`` here, or every server in it disappears from CodeBuddy."""
    env = env_for(workspace)
    folder = workspace["home"] / ".codebuddy"
    folder.mkdir()
    own = {"type": "stdio", "command": "/bin/cat", "args": []}
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"users-own": own}}), encoding="utf-8")
    before = _listed(clients, workspace, env)
    assert "users-own" in before, before  # the CLI reads mcp.json when it is the only one
    done = memself(workspace, env, "setup", "--only", "codebuddy")
    assert done.returncode == 0, done.stdout + done.stderr
    listed = _listed(clients, workspace, env)
    assert "users-own" in listed, listed
    assert "Connected" in listed.get(SERVER, ""), listed
    assert not (folder / ".mcp.json").exists()


def test_codebuddy_config_dir_is_honoured(clients: Clients, workspace) -> None:
    """A user who runs CodeBuddy with ``CODEBUDDY_CONFIG_DIR``: setup registers there, the CLI
    started with the same variable lists the server and its hooks inject the rule."""
    folder = workspace["home"] / "cb-config"
    folder.mkdir()
    env = env_for(workspace, CODEBUDDY_CONFIG_DIR=str(folder))
    done = memself(workspace, env, "setup", "--only", "codebuddy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "settings.json").is_file() and (folder / ".mcp.json").is_file()
    assert not (workspace["home"] / ".codebuddy" / "settings.json").exists()
    assert "Connected" in _listed(clients, workspace, env).get(SERVER, "")
    run = run_codebuddy(
        clients,
        workspace["home"],
        "你好",
        cwd=workspace["proj"],
        memself_home=workspace["memself"],
        stream_json=False,
        extra_env={"CODEBUDDY_CONFIG_DIR": str(folder)},
    )
    assert run.rc == 0, run.stderr[-2000:]
    assert run.bodies_containing("RULE-7c41"), "the rule did not reach the model"
