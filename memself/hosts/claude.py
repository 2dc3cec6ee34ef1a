"""Claude Code: ``~/.claude/settings.json`` hooks, Claude's JSON protocol (host-protocols §1)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memself.hosts.base import HookEvent, HookReply
from memself.hosts.common import (
    CLAUDE_EVENT_NAMES,
    CLAUDE_TIMEOUTS,
    SESSION_KEY_FALLBACKS,
    TURN_ID_FALLBACKS,
    parse_event,
    render_claudelike,
)

NAME = "claude"
ASK_TOOL = "AskUserQuestion"
EVENT_NAMES = CLAUDE_EVENT_NAMES
TIMEOUTS = CLAUDE_TIMEOUTS
CONTEXT_LIMIT = 10_000  # longer additionalContext is replaced by a file path and a preview
# Claude Code has its own memory: our instructions constrain this plugin only and leave it alone.
PLUGIN_SCOPED_WORDING = True

_CURSOR_HOOKS_MAX_BYTES = 1 << 20


def parse(payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
    return parse_event(
        NAME,
        payload,
        env,
        session_keys=SESSION_KEY_FALLBACKS,
        # prompt_id needs Claude Code 2.1.196+; generation_id is what Cursor sends when it runs
        # this Claude-registered hook.
        turn_keys=("prompt_id", "generation_id", *TURN_ID_FALLBACKS),
        prompt_keys=("prompt",),
        project_dir_env=("CLAUDE_PROJECT_DIR",),
    )


def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
    return render_claudelike(event, reply, EVENT_NAMES, system_message=True)


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], home: Path) -> bool:
    """Cursor also runs hooks from ``~/.claude/settings.json``. When this Claude-registered hook
    runs inside Cursor and Cursor's own hook of ours is installed, that one answers: injecting
    twice wastes context and a Claude-format Stop hook under Cursor has no loop cap."""
    under_cursor = bool(env.get("CURSOR_VERSION", "").strip()) or bool(
        isinstance(payload.get("cursor_version"), str) and payload["cursor_version"].strip()
    )
    return under_cursor and cursor_hook_installed(home)


def cursor_hook_installed(home: Path) -> bool:
    """Whether ``~/.cursor/hooks.json`` holds a memself (or original plugin) hook for Cursor."""
    from memself.hooks.command import hook_command_agent

    path = home / ".cursor" / "hooks.json"
    try:
        with path.open("rb") as fh:
            data = json.loads(fh.read(_CURSOR_HOOKS_MAX_BYTES).decode("utf-8-sig"))
    except (OSError, ValueError):
        return False
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, dict):
        return False
    for entries in hooks.values():
        for entry in entries if isinstance(entries, list) else ():
            command = entry.get("command") if isinstance(entry, dict) else None
            if isinstance(command, str) and hook_command_agent(command) == "cursor":
                return True
    return False
