"""The one table of hosts. The CLI's ``--agent`` choices, the installers and the tests read it.

Adding a host: one module here implementing ``base.HostAdapter``, one line below.
"""

from __future__ import annotations

from memself.hosts import claude, codebuddy, cursor, workbuddy
from memself.hosts.base import HostAdapter

HOSTS: dict[str, HostAdapter] = {
    claude.NAME: claude,
    cursor.NAME: cursor,
    codebuddy.NAME: codebuddy,
    workbuddy.NAME: workbuddy,
}
