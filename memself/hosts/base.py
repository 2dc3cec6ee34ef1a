"""The one interface every host adapter implements, and the host-neutral event and reply types.

The core takes a ``HookEvent`` and returns a ``HookReply``; it never sees a host's JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, NamedTuple, Protocol


class EventKind(str, Enum):
    SESSION_START = "session_start"
    PROMPT_SUBMIT = "prompt_submit"
    STOP = "stop"
    SUBAGENT_STOP = "subagent_stop"
    UNKNOWN = "unknown"


# NamedTuple, not a dataclass: ``dataclasses`` imports ``inspect`` and ``ast``, which costs the
# prompt hook more than everything else it does with a warm engine.
class HookEvent(NamedTuple):
    """One host event, normalised."""

    host: str
    kind: EventKind
    event_name: str  # the host's own event name, echoed back where a host wants it
    session_key: str  # sanitised, "" when the host gave none
    turn_id: str  # sanitised, "" when the host gives none (CodeBuddy, WorkBuddy)
    prompt: str  # "" for events without a prompt
    cwd: str
    stop_active: bool  # the host is already continuing because of a Stop hook
    # The key of the workspace of ``cwd`` (``memself.store.workspaces``), "" when there is none.
    workspace: str = ""
    # Stop only: the assistant's final answer as the host gives it ("" when it gives none).
    answer: str = ""


class HookReply(NamedTuple):
    """What the core wants the host to do. Every field is optional."""

    context: str = ""  # text added to the model's context
    continuation: str = ""  # Stop only: the model text of one more turn
    visible: str = ""  # Stop only: what the user sees of the continuation (Cursor shows it)
    user_message: str = ""  # shown to the user only (Claude Code systemMessage, showRecall)
    # Memories recalled into ``context``: rewarded only once the answer has reached the host.
    rewards: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.context or self.continuation or self.user_message)


class Popup(NamedTuple):
    """What the MEMORY_CONFIRM_V1 instruction says about the host's popup."""

    tool_wording: str  # how the instruction names the host's popup tool
    memory_tools: tuple[str, ...]  # the host's own memory tools the model must not call instead


class HostAdapter(Protocol):
    """Module-level members each ``memself/hosts/<host>.py`` exposes (checked by a test)."""

    NAME: str
    ASK_TOOL: str  # the host's popup tool
    POPUP: Popup  # the popup as the MEMORY_CONFIRM_V1 instruction describes it
    EVENT_NAMES: dict[EventKind, str]  # the host's name for each event we register (installers)
    TIMEOUTS: dict[EventKind, int]  # seconds, per registered event (installers)
    CONTEXT_LIMIT: int  # characters of injected text the host takes inline
    # The host's own memory, by name, which our instructions must leave alone ("" when it has
    # none): with a name they constrain "this plugin only".
    OWN_MEMORY: str
    # The client's config folder, relative to the user's home on every system (``~`` on Linux
    # and macOS, ``%USERPROFILE%`` on Windows), and the variable that names another one.
    CONFIG_DIR: str
    CONFIG_ENV: str | None
    # The shell that runs a hook's command string, per system ("linux", "macos", "windows"):
    # "sh" (a POSIX shell), "bash" (Git Bash on Windows), "powershell" (the payload is
    # PowerShell's stdin) or "powershell-stage" (the host pipes the payload into the command).
    HOOK_SHELLS: dict[str, str]
    # Whether a hook entry names its shell in a "shell" field (so the shell above is chosen,
    # not the client's default).
    HOOK_SHELL_FIELD: bool

    def parse(self, payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
        """Normalise a payload; ``env`` (the hook's environment) only fills a missing cwd."""
        ...

    def render(self, event: HookEvent, reply: HookReply) -> dict[str, Any] | None: ...

    def steps_aside(
        self, payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]
    ) -> bool:
        """True when another registration of ours handles this event (answer nothing).

        ``registered(host)`` says whether ``host``'s own config holds a hook of ours: where that
        config lives is the installers' knowledge, asked only when an adapter needs it.
        """
        ...


SESSION_KEY_LIMIT = 80
TURN_ID_LIMIT = 120

_ALLOWED_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def sanitise_key(raw: object, limit: int) -> str:
    """Trim, replace every char outside ``[A-Za-z0-9_-]`` with ``_``, cut to ``limit``.

    Original §4.2: session keys are cut to ``SESSION_KEY_LIMIT``, turn ids to ``TURN_ID_LIMIT``.
    """
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


# Every spelling of the events we handle, lower-cased. Hosts share them: Cursor runs Claude-format
# hooks with its own payloads, so an adapter must understand the other family's names too.
_KIND_BY_NAME = {
    "sessionstart": EventKind.SESSION_START,
    "userpromptsubmit": EventKind.PROMPT_SUBMIT,
    "beforesubmitprompt": EventKind.PROMPT_SUBMIT,
    "stop": EventKind.STOP,
    "subagentstop": EventKind.SUBAGENT_STOP,
}


def event_kind(name: object) -> EventKind:
    """The kind of a host event name, ``UNKNOWN`` for anything we do not handle."""
    if not isinstance(name, str):
        return EventKind.UNKNOWN
    return _KIND_BY_NAME.get(name.strip().lower(), EventKind.UNKNOWN)
