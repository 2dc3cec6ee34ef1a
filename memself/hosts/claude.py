"""Claude Code: ``~/.claude/settings.json`` hooks, Claude's JSON protocol (host-protocols §1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memself.hosts.base import HookEvent, HookReply
from memself.hosts.common import (
    CLAUDE_ASK_TOOL,
    CLAUDE_EVENT_NAMES,
    CLAUDE_POPUP,
    CLAUDE_TIMEOUTS,
    SESSION_KEY_FALLBACKS,
    TURN_ID_FALLBACKS,
    parse_event,
    payload_cwd,
    render_claudelike,
)
from memself.hosts.cursor import NAME as CURSOR
from memself.hosts.cursor import runs_this_hook as runs_in_cursor

NAME = "claude"
ASK_TOOL = CLAUDE_ASK_TOOL
POPUP = CLAUDE_POPUP
EVENT_NAMES = CLAUDE_EVENT_NAMES
TIMEOUTS = CLAUDE_TIMEOUTS
CONTEXT_LIMIT = 10_000  # longer additionalContext is replaced by a file path and a preview
# Claude Code has its own memory: our instructions constrain this plugin only and leave it alone.
OWN_MEMORY = "Claude Code"
CONFIG_DIR = ".claude"
CONFIG_ENV: str | None = None
# Windows: Git Bash runs hooks, or PowerShell where Git Bash is missing; the entry says
# "shell": "powershell", which every Windows has, so one command form works on every machine.
HOOK_SHELLS = {"linux": "sh", "macos": "sh", "windows": "powershell"}
HOOK_SHELL_FIELD = True


def working_directory(payload: dict[str, Any]) -> str:
    """``cwd``; Cursor, running this Claude-registered hook with its own payload, sends
    ``workspace_roots`` instead."""
    roots = payload.get("workspace_roots")
    first_root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else ""
    return payload_cwd(payload) or first_root


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
        directory=working_directory,
        project_dir_env=("CLAUDE_PROJECT_DIR",),
    )


def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
    return render_claudelike(event, reply, EVENT_NAMES, system_message=True)


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]) -> bool:
    """Cursor also runs hooks from ``~/.claude/settings.json``. When this Claude-registered hook
    runs inside Cursor and Cursor's own hook of ours is installed, that one answers: injecting
    twice wastes context and a Claude-format Stop hook under Cursor has no loop cap."""
    return runs_in_cursor(payload, env) and registered(CURSOR)
