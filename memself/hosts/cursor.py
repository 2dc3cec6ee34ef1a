"""Cursor: ``~/.cursor/hooks.json`` hooks, Cursor's own JSON protocol (host-protocols §2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memself.hosts.base import EventKind, HookEvent, HookReply, Popup
from memself.hosts.common import SESSION_KEY_FALLBACKS, TURN_ID_FALLBACKS, parse_event, payload_cwd

NAME = "cursor"
ASK_TOOL = "AskQuestion"
# Its popup tool's name is not documented everywhere: the instruction describes it instead.
POPUP = Popup(f"你自带的提问工具（让用户在弹窗里点选选项的工具，例如 {ASK_TOOL}）", ())
EVENT_NAMES = {
    EventKind.SESSION_START: "sessionStart",
    EventKind.PROMPT_SUBMIT: "beforeSubmitPrompt",
    EventKind.STOP: "stop",
}
# The prompt hook gets 5 s: Cursor holds the user's message until it answers. The installer
# also sets ``loop_limit: 1`` on stop.
TIMEOUTS = {EventKind.SESSION_START: 10, EventKind.PROMPT_SUBMIT: 5, EventKind.STOP: 20}
CONTEXT_LIMIT = 10_000  # beforeSubmitPrompt: longer text goes to a file (client 3.20.17)
OWN_MEMORY = ""
CONFIG_DIR = ".cursor"
CONFIG_ENV: str | None = None
# Windows: the payload is piped through PowerShell (``Get-Content -Raw | & { $input | <command> }``).
HOOK_SHELLS = {"linux": "sh", "macos": "sh", "windows": "powershell-stage"}
HOOK_SHELL_FIELD = False


def parse(payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
    return parse_event(
        NAME,
        payload,
        env,
        session_keys=("conversation_id", *SESSION_KEY_FALLBACKS),
        turn_keys=("generation_id", *TURN_ID_FALLBACKS),
        prompt_keys=("prompt",),
        directory=workspace_root,
        project_dir_env=("CURSOR_PROJECT_DIR",),
    )


def workspace_root(payload: dict[str, Any]) -> str:
    """Cursor names the open folders in ``workspace_roots``, the first being the one the chat
    works in; ``cwd`` when it runs a hook registered for Claude Code with a Claude payload."""
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0].strip():
        return roots[0]
    return payload_cwd(payload)


def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
    """Cursor wants JSON on every answer, ``{}`` for nothing."""
    if event.kind in (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT):
        # beforeSubmitPrompt's additional_context is undocumented but accepted (3.20.17); Cursor
        # has no user-only message channel, so ``user_message`` (showRecall) is not rendered.
        return {"additional_context": reply.context} if reply.context else {}
    if event.kind is EventKind.STOP and not event.stop_active:
        # The follow-up is sent as the next *user* message, visible in chat: it carries the
        # visible text; the core swaps in the model text when that prompt comes back.
        followup = reply.visible or reply.continuation
        if followup:
            return {"followup_message": followup}
    return {}


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]) -> bool:
    return False


def runs_this_hook(payload: dict[str, Any], env: Mapping[str, str]) -> bool:
    """Whether Cursor is the program running this hook: it also runs the hooks registered for
    Claude Code, with its own payloads."""
    return bool(env.get("CURSOR_VERSION", "").strip()) or bool(
        isinstance(payload.get("cursor_version"), str) and payload["cursor_version"].strip()
    )
