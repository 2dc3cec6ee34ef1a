"""WorkBuddy: ``~/.workbuddy/settings.json``; it embeds the CodeBuddy Code engine (§4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memself.hosts.base import HookEvent, HookReply
from memself.hosts.codebuddy import PROMPT_KEYS
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

NAME = "workbuddy"
ASK_TOOL = CLAUDE_ASK_TOOL
POPUP = CLAUDE_POPUP
EVENT_NAMES = CLAUDE_EVENT_NAMES
TIMEOUTS = CLAUDE_TIMEOUTS
CONTEXT_LIMIT = 10_000
OWN_MEMORY = ""
CONFIG_DIR = ".workbuddy"
CONFIG_ENV: str | None = None
# WorkBuddy embeds the CodeBuddy engine (Git Bash enforced on Windows); it ships for macOS and
# Windows only. Its config folder is set by WorkBuddy itself, never by the user's variable.
HOOK_SHELLS = {"linux": "sh", "macos": "sh", "windows": "bash"}
HOOK_SHELL_FIELD = False


def parse(payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
    return parse_event(
        NAME,
        payload,
        env,
        session_keys=SESSION_KEY_FALLBACKS,
        turn_keys=(),
        prompt_keys=PROMPT_KEYS,
        directory=payload_cwd,
        project_dir_env=("WORKBUDDY_PROJECT_DIR", "CODEBUDDY_PROJECT_DIR"),
    )


def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
    return render_claudelike(event, reply, EVENT_NAMES, system_message=False)


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]) -> bool:
    return False
