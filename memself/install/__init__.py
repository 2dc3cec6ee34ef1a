"""One installer per host: detect the client, register memself's hooks, MCP server and skill in
it, and take them out again. Built from the hosts' table (``memself.hosts``) and their facts: a
host's ``mcp.via`` picks the kind of installer, ``_KINDS`` below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memself.hosts import FACTS
from memself.install.base import HostInstaller, InstallContext
from memself.install.claude import ClaudeInstaller
from memself.install.claude_cli import find_claude
from memself.install.jsonhost import JsonHostInstaller

_KINDS: dict[str, type[JsonHostInstaller]] = {"file": JsonHostInstaller, "claude-cli": ClaudeInstaller}
INSTALLERS: dict[str, HostInstaller] = {name: _KINDS[facts.mcp_via](facts) for name, facts in FACTS.items()}


def context_for(home: Path, **fields: Any) -> InstallContext:
    """The context of a real run for ``home``: the installers' own lookups (such as a host's CLI)
    done here, so that callers (setup, uninstall, doctor) name no host."""
    return InstallContext(home=home, claude_bin=find_claude(home), **fields)
