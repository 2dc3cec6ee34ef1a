"""Whether a host's own config holds a hook of ours: what an adapter asks before it steps aside
(a hook registered for another client that this one also runs).

Asked on the hook path, so it reads a bounded prefix of the hooks file and never raises; where
the file is and its shape are the host's facts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from memself.hook.command import hook_command_agent
from memself.hosts.facts import HostFacts

# A hooks file read on the hook path is read this far at most.
HOOKS_FILE_MAX_BYTES = 1 << 20


def hook_registered(facts: HostFacts, home: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``facts``' hooks file holds a hook of ours (or the original plugin's) for it."""
    try:
        with (facts.config_root(home, env) / facts.hooks_file).open("rb") as fh:
            data = json.loads(fh.read(HOOKS_FILE_MAX_BYTES).decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return False
    return any(hook_command_agent(c) == facts.name for c in hook_commands(data, facts.hook_shape))


def registered_in(
    facts: Mapping[str, HostFacts], home: Path, env: Mapping[str, str] | None = None
) -> Callable[[str], bool]:
    """The ``registered(host)`` an adapter is handed, for the hosts in ``facts``."""

    def registered(host: str) -> bool:
        known = facts.get(host)
        return known is not None and hook_registered(known, home, env)

    return registered


def hook_commands(data: object, shape: Literal["nested", "flat"]) -> Iterator[str]:
    """Every hook command string in a parsed hooks file of ``shape``, skipping what is malformed."""
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, dict):
        return
    for items in hooks.values():
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                continue
            if shape == "flat":
                handlers: list[Any] = [item]
            else:
                handlers = item["hooks"] if isinstance(item.get("hooks"), list) else []
            for handler in handlers:
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str):
                    yield command
