"""Cursor: Cursor's own JSON protocol; its facts are in ``hosts/cursor.json``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.hosts.common import never_steps_aside, payload_cwd, payload_parser
from memself.hosts.facts import load_facts

FACTS = load_facts("cursor")
NAME = FACTS.name
ASK_TOOL = FACTS.ask_tool
POPUP = FACTS.popup
EVENT_NAMES = FACTS.event_names
TIMEOUTS = FACTS.timeouts
CONTEXT_LIMIT = FACTS.context_limit
OWN_MEMORY = FACTS.own_memory
CONFIG_DIR = FACTS.config_dir
CONFIG_ENV = FACTS.config_env
HOOK_SHELLS = FACTS.hook_shells
HOOK_SHELL_FIELD = FACTS.hook_shell_field


# On Windows Cursor writes a root the way its file URIs do: "/c:/dev/proj". Left as it is,
# Windows' path functions take it for "\\c:\\dev\\proj", a path that does not exist.
_URI_DRIVE = re.compile(r"/([A-Za-z]):(?:[/\\]|$)")


def first_root(payload: dict[str, Any]) -> str:
    """The first of ``workspace_roots``, the folder the chat works in, or "". A Windows root
    loses its URI slash and gets its drive letter as the other clients write it (``C:/``), so a
    project has one workspace whichever client saved the memory."""
    roots = payload.get("workspace_roots")
    if not (isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0].strip()):
        return ""
    root: str = roots[0]
    drive = _URI_DRIVE.match(root)
    return f"{drive.group(1).upper()}:/{root[drive.end() :]}" if drive else root


def workspace_root(payload: dict[str, Any]) -> str:
    """Cursor names the open folders in ``workspace_roots``; ``cwd`` when it runs a hook
    registered for Claude Code with a Claude payload."""
    return first_root(payload) or payload_cwd(payload)


parse = payload_parser(FACTS, workspace_root)
steps_aside = never_steps_aside


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


def runs_this_hook(payload: dict[str, Any], env: Mapping[str, str]) -> bool:
    """Whether Cursor is the program running this hook: it also runs the hooks registered for
    Claude Code, with its own payloads."""
    return bool(env.get("CURSOR_VERSION", "").strip()) or bool(
        isinstance(payload.get("cursor_version"), str) and payload["cursor_version"].strip()
    )
