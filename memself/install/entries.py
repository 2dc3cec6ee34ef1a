"""Our entries inside the hosts' JSON files: recognise them, upsert them, take them out.

Recognition is by a stable marker, never by position:
- a hook is ours when its command runs memself's ``memself/hooks/entry.py`` (or ``hooks/entry.py``,
  its place before it moved into the package, or ``memself hook``) or the original Node plugin's
  ``memory.mjs hook`` with ``--agent`` (``memself.hook.command``);
- the MCP server is ours by its name, ``memory-self-evolution`` (the original plugin used the same
  name, so its entry is replaced, not duplicated); the original's older ``dsh-memory`` server is
  removed by its name, as the original did, from every MCP file we edit.

Upserting keeps the position of an existing entry of ours (and of the group holding it), appends
otherwise, and removes every other entry of ours (duplicates, and events we no longer use, such
as the original's ``PostToolUse``). Every transform takes and returns the parsed object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from memself.hook.command import is_our_hook_command
from memself.install.jsonfile import expect_dict, expect_list
from memself.launcher import python_command
from memself.mcp_server import SERVER_NAME as SERVER_NAME  # the installers name the MCP entry through here
from memself.text.messages import RESOLVE_TOOL

LEGACY_SERVER_NAMES = ("dsh-memory",)
RESOLVE_RULE = f"mcp__{SERVER_NAME}__{RESOLVE_TOOL}"


def mcp_command(host: str) -> list[str]:
    """The MCP server's argv for ``host``: the current interpreter, absolute, no shell, isolated
    (``memself.launcher``): the client starts it in the project, which must not shadow modules."""
    return python_command("memself", "mcp", "--agent", host)


def is_our_hook(command: object) -> bool:
    return isinstance(command, str) and is_our_hook_command(command)


class Registration(NamedTuple):
    """One hook of ours: the host's event name, the timeout it gives the hook, and the command."""

    event: str
    timeout: int
    command: str
    shell: str | None = None  # the entry's "shell" field, where the host has one and it matters


# ---- Claude-shaped hooks (Claude Code, CodeBuddy, WorkBuddy): event -> [group{hooks:[handler]}]


def claude_handler(command: str, timeout: int, shell: str | None = None) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
    if shell is not None:
        handler["shell"] = shell
    return handler


def upsert_nested_hooks(
    data: dict[str, Any], path: Path, registrations: Sequence[Registration]
) -> dict[str, Any]:
    hooks = expect_dict(data, "hooks", path, "hooks")
    if hooks is None:
        hooks = data["hooks"] = {}
    wanted = {r.event: r for r in registrations}
    for event in list(hooks):
        groups = expect_list(hooks, event, path, f"hooks.{event}")
        if groups is None:
            continue
        ours = wanted.get(event)
        replacement = claude_handler(ours.command, ours.timeout, ours.shell) if ours is not None else None
        placed = _strip_nested(groups, path, event, replacement)
        if event in wanted and not placed:
            groups.append({"matcher": "", "hooks": [replacement]})
        if not groups and event not in wanted:
            del hooks[event]
    for r in registrations:
        if r.event not in hooks:
            hooks[r.event] = [{"matcher": "", "hooks": [claude_handler(r.command, r.timeout, r.shell)]}]
    return data


def remove_nested_hooks(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = expect_dict(data, "hooks", path, "hooks")
    if not hooks:
        return data
    for event in list(hooks):
        groups = expect_list(hooks, event, path, f"hooks.{event}")
        if groups is not None:
            _strip_nested(groups, path, event, None)
    return data


def _strip_nested(groups: list[Any], path: Path, event: str, replacement: dict[str, Any] | None) -> bool:
    """Remove our handlers from ``groups``; put ``replacement`` where the first one was.

    A group left without handlers by this is removed (it held only ours). Returns whether the
    replacement was placed.
    """
    placed = False
    for group in list(groups):
        if not isinstance(group, dict):
            continue
        handlers = expect_list(group, "hooks", path, f"hooks.{event}[].hooks")
        if not handlers:
            continue
        kept: list[Any] = []
        ours = False
        for handler in handlers:
            if isinstance(handler, dict) and is_our_hook(handler.get("command")):
                ours = True
                if replacement is not None and not placed:
                    kept.append(replacement)
                    placed = True
            else:
                kept.append(handler)
        if not ours:
            continue
        if kept:
            group["hooks"] = kept
        else:
            groups.remove(group)
    return placed


# ---- Cursor hooks: {"version": 1, "hooks": {event: [{command, timeout}]}}


def upsert_flat_hooks(
    data: dict[str, Any],
    path: Path,
    registrations: Sequence[Registration],
    fields: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Our flat entries (Cursor's shape), one per event, with ``fields[event]`` added to each."""
    fields = fields or {}

    def entry(r: Registration) -> dict[str, Any]:
        return {"command": r.command, "timeout": r.timeout, **fields.get(r.event, {})}

    if "version" not in data:
        data = {"version": 1, **data}
    hooks = expect_dict(data, "hooks", path, "hooks")
    if hooks is None:
        hooks = data["hooks"] = {}
    wanted = {r.event: r for r in registrations}
    for event in list(hooks):
        entries = expect_list(hooks, event, path, f"hooks.{event}")
        if entries is None:
            continue
        replacement = entry(wanted[event]) if event in wanted else None
        placed = _strip_flat(entries, replacement)
        if event in wanted and not placed:
            entries.append(replacement)
        if not entries and event not in wanted:
            del hooks[event]
    for r in registrations:
        if r.event not in hooks:
            hooks[r.event] = [entry(r)]
    return data


def remove_flat_hooks(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = expect_dict(data, "hooks", path, "hooks")
    if not hooks:
        return data
    for event in list(hooks):
        entries = expect_list(hooks, event, path, f"hooks.{event}")
        if entries is not None:
            _strip_flat(entries, None)
    return data


def _strip_flat(entries: list[Any], replacement: dict[str, Any] | None) -> bool:
    positions = [
        i for i, entry in enumerate(entries) if isinstance(entry, dict) and is_our_hook(entry.get("command"))
    ]
    for index in reversed(positions):
        del entries[index]
    if not positions or replacement is None:
        return False
    entries.insert(positions[0], replacement)
    return True


# ---- MCP server lists: {"mcpServers": {name: {...}}}


def mcp_entry(command: Sequence[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command[0], "args": list(command[1:])}


def upsert_mcp(data: dict[str, Any], path: Path, command: Sequence[str]) -> dict[str, Any]:
    servers = expect_dict(data, "mcpServers", path, "mcpServers")
    if servers is None:
        servers = data["mcpServers"] = {}
    _drop_legacy_servers(servers)
    entry = mcp_entry(command)
    if servers.get(SERVER_NAME) != entry:
        servers[SERVER_NAME] = entry
    return data


def remove_mcp(data: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = expect_dict(data, "mcpServers", path, "mcpServers")
    if servers:
        servers.pop(SERVER_NAME, None)
        _drop_legacy_servers(servers)
    return data


def update_mcp_if_present(data: dict[str, Any], path: Path, command: Sequence[str]) -> dict[str, Any]:
    """Point an existing registration of ours at the current server; add nothing new. The
    original's DSH-era server goes in any case, as the original removed it."""
    servers = expect_dict(data, "mcpServers", path, "mcpServers")
    if servers and SERVER_NAME in servers:
        return upsert_mcp(data, path, command)
    if servers:
        _drop_legacy_servers(servers)
    return data


def _drop_legacy_servers(servers: dict[str, Any]) -> None:
    # By name, whatever it runs, as the original did: ``dsh-memory`` is this plugin's own old
    # name (the DSH/Cordis plugin it grew from).
    for name in LEGACY_SERVER_NAMES:
        servers.pop(name, None)


# ---- Claude Code permission rule: {"permissions": {"allow": [rule]}}


def add_allow_rule(data: dict[str, Any], path: Path, rule: str = RESOLVE_RULE) -> dict[str, Any]:
    permissions = expect_dict(data, "permissions", path, "permissions")
    if permissions is None:
        permissions = data["permissions"] = {}
    allow = expect_list(permissions, "allow", path, "permissions.allow")
    if allow is None:
        allow = permissions["allow"] = []
    if rule not in allow:
        allow.append(rule)
    return data


def remove_allow_rule(data: dict[str, Any], path: Path, rule: str = RESOLVE_RULE) -> dict[str, Any]:
    permissions = expect_dict(data, "permissions", path, "permissions")
    if not permissions:
        return data
    allow = expect_list(permissions, "allow", path, "permissions.allow")
    if allow and rule in allow:
        permissions["allow"] = [item for item in allow if item != rule]
    return data
