"""Installs made before the MCP server started isolated registered ``<python> -m memself mcp``,
which runs the opened project's modules: installing again replaces that entry with the isolated
one (the same bytes as a fresh install), and a second install changes nothing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from memself.install import INSTALLERS, claude_cli
from memself.install.base import InstallContext
from memself.install.claude import ClaudeMcpStep
from memself.install.entries import mcp_command
from memself.launcher import LAUNCHER

SKILL = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "installers"
    / "_skill"
    / "memory-self-evolution-manage"
)


def old_mcp_command(host: str) -> list[str]:
    return [sys.executable, "-m", "memself", "mcp", "--agent", host]


def files(home: Path) -> dict[str, bytes]:
    """The home's files but the backups an install leaves of what it changed."""
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.endswith(".memself.bak")
    }


@pytest.mark.parametrize("host", ["codebuddy", "cursor", "workbuddy"])
def test_old_module_entry_is_replaced_by_the_isolated_one(host: str, tmp_path: Path) -> None:
    installer = INSTALLERS[host]
    old_home, fresh_home = tmp_path / "old", tmp_path / "fresh"
    for home in (old_home, fresh_home):
        installer.config_root(home).mkdir(parents=True)
    installer.apply(InstallContext(home=old_home, skill_source=SKILL, mcp_command=old_mcp_command))
    before = b"".join(files(old_home).values())
    assert b'"-m",' in before and LAUNCHER.encode() not in before

    installer.apply(InstallContext(home=old_home, skill_source=SKILL))
    installer.apply(InstallContext(home=fresh_home, skill_source=SKILL))
    upgraded = files(old_home)
    assert upgraded == files(fresh_home)
    assert b'"-m",' not in b"".join(upgraded.values())
    assert LAUNCHER.encode() in b"".join(upgraded.values())

    installer.apply(InstallContext(home=old_home, skill_source=SKILL))
    assert files(old_home) == upgraded, "a second install must give identical bytes"


FAKE_CLAUDE = """#!{python}
import json, os, sys
home = os.environ["HOME"]
path = os.path.join(home, ".claude.json")
data = json.load(open(path)) if os.path.exists(path) else {{}}
args = sys.argv[1:]
with open(os.path.join(home, "claude-calls.log"), "a") as log:
    log.write(json.dumps(args[:2]) + "\\n")
if args[:2] == ["mcp", "add"]:
    name, cmd = args[4], args[6:]
    entry = {{"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {{}}}}
    data.setdefault("mcpServers", {{}})[name] = entry
elif args[:2] == ["mcp", "remove"]:
    data.get("mcpServers", {{}}).pop(args[-1])
json.dump(data, open(path, "w"))
"""


def test_claude_old_module_entry_is_replaced(isolated_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text(FAKE_CLAUDE.format(python=sys.executable))
    claude.chmod(0o755)
    ClaudeMcpStep(isolated_home, tuple(old_mcp_command("claude")), str(claude)).run()
    assert claude_cli.registered_entry(isolated_home)["args"][:1] == ["-m"]  # type: ignore[index]

    assert ClaudeMcpStep(isolated_home, tuple(mcp_command("claude")), str(claude)).run().changed
    entry = claude_cli.registered_entry(isolated_home)
    assert entry is not None and entry["args"][:2] == ["-I", LAUNCHER]
    assert claude_cli.matches(entry, mcp_command("claude"))
    state = (isolated_home / ".claude.json").read_bytes()
    assert not ClaudeMcpStep(isolated_home, tuple(mcp_command("claude")), str(claude)).run().changed
    assert (isolated_home / ".claude.json").read_bytes() == state
    calls = [json.loads(line) for line in (isolated_home / "claude-calls.log").read_text().splitlines()]
    assert calls == [["mcp", "add"], ["mcp", "remove"], ["mcp", "add"]]
    shutil.rmtree(claude.parent)
