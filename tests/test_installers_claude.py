"""Claude Code's MCP registration through its CLI: finding the binary, the argv, idempotence.

The real CLI is exercised in tests/e2e; here a small script stands in for ``claude`` so the
decisions (add, replace the original plugin's entry, do nothing, print the command) are pinned.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memself.install import claude_cli
from memself.install.claude import ClaudeMcpStep
from memself.install.entries import mcp_command
from memself.launcher import LAUNCHER

FAKE_CLAUDE = """#!{python}
import json, os, sys
home = os.environ["HOME"]
with open(os.path.join(home, "claude-calls.log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
path = os.path.join(home, ".claude.json")
data = json.load(open(path)) if os.path.exists(path) else {{}}
args = sys.argv[1:]
if os.environ.get("FAKE_CLAUDE_FAIL"):
    print("boom: not logged in", file=sys.stderr)
    sys.exit(3)
if args[:2] == ["mcp", "add"]:
    name, cmd = args[4], args[6:]
    data.setdefault("mcpServers", {{}})[name] = {{"type": "stdio", "command": cmd[0],
                                                 "args": cmd[1:], "env": {{}}}}
elif args[:2] == ["mcp", "remove"]:
    data.get("mcpServers", {{}}).pop(args[-1])
json.dump(data, open(path, "w"))
"""


@pytest.fixture
def fake_claude(tmp_path: Path) -> str:
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(0o755)
    return str(script)


def calls(home: Path) -> list[list[str]]:
    log = home / "claude-calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_find_claude_prefers_the_explicit_variable(
    isolated_home: Path, fake_claude: str, tmp_path: Path
) -> None:
    other = tmp_path / "other" / "claude"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    env = {"PATH": str(other.parent), claude_cli.BIN_ENV: fake_claude}
    assert claude_cli.find_claude(isolated_home, env) == fake_claude
    assert claude_cli.find_claude(isolated_home, {"PATH": str(other.parent)}) == str(other)


def test_find_claude_falls_back_to_the_newest_desktop_copy(isolated_home: Path) -> None:
    root = isolated_home / "Library" / "Application Support" / "Claude" / "claude-code"
    for version in ("2.1.9", "2.1.100", "2.0.300"):
        binary = root / version / "claude"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    found = claude_cli.find_claude(isolated_home, {"PATH": "/nonexistent"})
    assert found == str(root / "2.1.100" / "claude")
    assert claude_cli.find_claude(isolated_home / "nothing", {"PATH": "/nonexistent"}) is None


def test_add_once_then_nothing(isolated_home: Path, fake_claude: str) -> None:
    command = tuple(mcp_command("claude"))
    step = ClaudeMcpStep(isolated_home, command, fake_claude)
    assert step.preview().changed
    result = step.run()
    assert result.changed and not result.manual
    assert calls(isolated_home) == [
        ["mcp", "add", "--scope", "user", "memory-self-evolution", "--", *command]
    ]
    assert not step.run().changed
    assert len(calls(isolated_home)) == 1


def test_original_plugin_entry_is_replaced(isolated_home: Path, fake_claude: str) -> None:
    (isolated_home / ".claude.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory-self-evolution": {
                        "type": "stdio",
                        "command": "/usr/local/bin/node",
                        "args": ["/x/bin/memory-mcp.mjs", "--agent", "claude"],
                    }
                }
            }
        )
    )
    ClaudeMcpStep(isolated_home, tuple(mcp_command("claude")), fake_claude).run()
    assert [c[:2] for c in calls(isolated_home)] == [["mcp", "remove"], ["mcp", "add"]]
    entry = claude_cli.registered_entry(isolated_home)
    assert claude_cli.matches(entry, mcp_command("claude"))


def test_removal_and_failure_paths(
    isolated_home: Path, fake_claude: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = tuple(mcp_command("claude"))
    assert not ClaudeMcpStep(isolated_home, command, fake_claude, removing=True).run().changed
    ClaudeMcpStep(isolated_home, command, fake_claude).run()
    monkeypatch.setenv("FAKE_CLAUDE_FAIL", "1")
    failed = ClaudeMcpStep(isolated_home, command, fake_claude, removing=True).run()
    assert not failed.changed and "退出码 3" in failed.detail and "not logged in" in failed.detail
    assert failed.manual == f"{fake_claude} mcp remove --scope user memory-self-evolution"
    monkeypatch.delenv("FAKE_CLAUDE_FAIL")
    assert ClaudeMcpStep(isolated_home, command, fake_claude, removing=True).run().changed
    assert claude_cli.registered_entry(isolated_home) is None


def test_without_binary_the_exact_command_is_given(isolated_home: Path) -> None:
    result = ClaudeMcpStep(isolated_home, tuple(mcp_command("claude")), None).run()
    assert not result.changed
    assert result.manual.startswith("claude mcp add --scope user memory-self-evolution -- ")
    assert result.manual.endswith(f"-- {sys.executable} -I {LAUNCHER} memself mcp --agent claude")
    assert not (isolated_home / ".claude.json").exists()
