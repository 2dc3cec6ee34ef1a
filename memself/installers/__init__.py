"""One installer per host: detect the client, register memself's hooks, MCP server and skill in
it, and take them out again. The table below is the only list of installers; its keys are the
keys of ``memself.hosts.HOSTS`` (a test holds them equal).

Adding a host: one module here exposing ``INSTALLER`` (``base.HostInstaller``), one line below.
"""

from __future__ import annotations

from memself.installers import claude, codebuddy, cursor, workbuddy
from memself.installers.base import HostInstaller

INSTALLERS: dict[str, HostInstaller] = {
    claude.INSTALLER.name: claude.INSTALLER,
    cursor.INSTALLER.name: cursor.INSTALLER,
    codebuddy.INSTALLER.name: codebuddy.INSTALLER,
    workbuddy.INSTALLER.name: workbuddy.INSTALLER,
}
