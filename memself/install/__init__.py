"""One installer per host: detect the client, register memself's hooks, MCP server and skill in
it, and take them out again. The table below is the only list of installers; its keys are the
keys of ``memself.hosts.HOSTS`` (a test holds them equal).

Adding a host: one module here exposing ``INSTALLER`` (``base.HostInstaller``), one line below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memself.install import claude, codebuddy, cursor, workbuddy
from memself.install.base import HostInstaller, InstallContext
from memself.install.claude_cli import find_claude

INSTALLERS: dict[str, HostInstaller] = {
    claude.INSTALLER.name: claude.INSTALLER,
    cursor.INSTALLER.name: cursor.INSTALLER,
    codebuddy.INSTALLER.name: codebuddy.INSTALLER,
    workbuddy.INSTALLER.name: workbuddy.INSTALLER,
}


def context_for(home: Path, **fields: Any) -> InstallContext:
    """The context of a real run for ``home``: the installers' own lookups (such as a host's CLI)
    done here, so that callers (setup, uninstall, doctor) name no host."""
    return InstallContext(home=home, claude_bin=find_claude(home), **fields)
