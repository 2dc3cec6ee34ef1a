"""The one table of hosts. The CLI's ``--agent`` choices, the installers and the tests read it.

Adding a host: its facts in ``hosts/<name>.json`` at the top of the repository, one module here
implementing ``base.HostAdapter`` (its behaviour, taking ``common``'s defaults where the host does
not differ), and one entry in ``_ADAPTERS`` below. The installers are built from the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memself.hosts import claude, codebuddy, cursor, workbuddy
from memself.hosts.base import HostAdapter
from memself.hosts.facts import HostFacts

_ADAPTERS = (claude, cursor, codebuddy, workbuddy)
HOSTS: dict[str, HostAdapter] = {adapter.NAME: adapter for adapter in _ADAPTERS}
FACTS: dict[str, HostFacts] = {adapter.NAME: adapter.FACTS for adapter in _ADAPTERS}


def guess_host(payload: Mapping[str, Any]) -> str:
    """The host of a hook command that names none (registered by hand), guessed as the original
    plugin did: a PascalCase event name (``SessionStart``, ``UserPromptSubmit``, ``Stop``) is
    CodeBuddy's, anything else (``sessionStart``, ``beforeSubmitPrompt``, no name) Cursor's."""
    name = payload.get("hook_event_name")
    return codebuddy.NAME if isinstance(name, str) and name[:1].isupper() else cursor.NAME
