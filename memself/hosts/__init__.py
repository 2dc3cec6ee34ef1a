"""The one table of hosts. The CLI's ``--agent`` choices, the installers and the tests read it.

Adding a host: one module here implementing ``base.HostAdapter``, one line below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memself.hosts import claude, codebuddy, cursor, workbuddy
from memself.hosts.base import HostAdapter

HOSTS: dict[str, HostAdapter] = {
    claude.NAME: claude,
    cursor.NAME: cursor,
    codebuddy.NAME: codebuddy,
    workbuddy.NAME: workbuddy,
}


def guess_host(payload: Mapping[str, Any]) -> str:
    """The host of a hook command that names none (registered by hand), guessed as the original
    plugin did: a PascalCase event name (``SessionStart``, ``UserPromptSubmit``, ``Stop``) is
    CodeBuddy's, anything else (``sessionStart``, ``beforeSubmitPrompt``, no name) Cursor's."""
    name = payload.get("hook_event_name")
    return codebuddy.NAME if isinstance(name, str) and name[:1].isupper() else cursor.NAME
