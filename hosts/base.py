"""The one interface every host adapter implements, and the host-neutral event and reply types.

The core takes a ``HookEvent`` and returns a ``HookReply``; it never sees a host's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol


class EventKind(str, Enum):
    SESSION_START = "session_start"
    PROMPT_SUBMIT = "prompt_submit"
    STOP = "stop"
    SUBAGENT_STOP = "subagent_stop"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class HookEvent:
    """One host event, normalised."""

    host: str
    kind: EventKind
    event_name: str  # the host's own event name, echoed back where a host wants it
    session_key: str  # sanitised, "" when the host gave none
    turn_id: str  # sanitised, "" when the host gives none (CodeBuddy, WorkBuddy)
    prompt: str  # "" for events without a prompt
    cwd: str
    stop_active: bool  # the host is already continuing because of a Stop hook


@dataclass(frozen=True)
class HookReply:
    """What the core wants the host to do. Every field is optional."""

    context: str = ""  # text added to the model's context
    continuation: str = ""  # Stop only: the model text of one more turn
    visible: str = ""  # Stop only: what the user sees of the continuation (Cursor shows it)
    user_message: str = ""  # shown to the user only (Claude Code systemMessage, showRecall)

    @property
    def empty(self) -> bool:
        return not (self.context or self.continuation or self.user_message)


class HostAdapter(Protocol):
    """Module-level members each ``hosts/<host>.py`` exposes (checked by a test)."""

    NAME: str
    ASK_TOOL: str  # the host's popup tool, named in the MEMORY_CONFIRM_V1 instruction

    def parse(self, payload: dict[str, Any]) -> HookEvent: ...

    def render(self, event: HookEvent, reply: HookReply) -> dict[str, Any] | None: ...


_ALLOWED_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def sanitise_key(raw: object, limit: int) -> str:
    """Trim, replace every char outside ``[A-Za-z0-9_-]`` with ``_``, cut to ``limit`` (original §4.2)."""
    if not isinstance(raw, str):
        return ""
    text = raw.strip()
    return "".join(c if c in _ALLOWED_KEY_CHARS else "_" for c in text)[:limit]


def first_text(payload: dict[str, Any], *keys: str) -> str:
    """The first non-empty string among ``keys``."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""
