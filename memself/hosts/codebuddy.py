"""CodeBuddy Code (CLI and IDE): ``~/.codebuddy/settings.json``, Claude-shaped JSON (§3)."""

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
    parse_event,
    payload_cwd,
    render_claudelike,
)

NAME = "codebuddy"
ASK_TOOL = CLAUDE_ASK_TOOL
POPUP = CLAUDE_POPUP
EVENT_NAMES = CLAUDE_EVENT_NAMES
TIMEOUTS = CLAUDE_TIMEOUTS
CONTEXT_LIMIT = 10_000  # undocumented; Claude Code's cap, to be safe
OWN_MEMORY = ""
CONFIG_DIR = ".codebuddy"
CONFIG_ENV: str | None = "CODEBUDDY_CONFIG_DIR"
# Windows: Git Bash is enforced (no cmd or PowerShell).
HOOK_SHELLS = {"linux": "sh", "macos": "sh", "windows": "bash"}
HOOK_SHELL_FIELD = False

# The original read ``user_prompt``; CodeBuddy Code 2.117.0 sends ``prompt``.
PROMPT_KEYS = ("prompt", "user_prompt")


def parse(payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
    # No turn id: the prompt hook gets none (Stop has a generation_id, but prompt and stop must
    # agree on the key, so it is not used).
    return parse_event(
        NAME,
        payload,
        env,
        session_keys=SESSION_KEY_FALLBACKS,
        turn_keys=(),
        prompt_keys=PROMPT_KEYS,
        directory=payload_cwd,
        project_dir_env=("CODEBUDDY_PROJECT_DIR",),
    )


def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
    return render_claudelike(event, reply, EVENT_NAMES, system_message=False)


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]) -> bool:
    return False
