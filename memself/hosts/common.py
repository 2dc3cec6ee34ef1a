"""The defaults every adapter takes unless its host differs: payload parsing from the host's
facts, and rendering for hosts that speak Claude Code's JSON.

Claude Code, CodeBuddy Code and WorkBuddy (which embeds the CodeBuddy engine) share one output
shape; they differ only in field names on input and in whether ``systemMessage`` is used, which
their facts say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from memself.hosts.base import (
    SESSION_KEY_LIMIT,
    TURN_ID_LIMIT,
    EventKind,
    HookEvent,
    HookReply,
    event_kind,
    first_text,
    sanitise_key,
)
from memself.hosts.facts import HostFacts
from memself.store.workspaces import workspace_of


class Parse(Protocol):
    def __call__(self, payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent: ...


Render = Callable[[HookEvent, HookReply], dict[str, Any] | None]


def parse_event(
    host: str,
    payload: dict[str, Any],
    env: Mapping[str, str] | None,
    *,
    session_keys: tuple[str, ...],
    turn_keys: tuple[str, ...],
    prompt_keys: tuple[str, ...],
    directory: Callable[[dict[str, Any]], str],
    project_dir_env: tuple[str, ...],
) -> HookEvent:
    """Normalise one payload. Unknown fields are ignored; wrong types count as missing.

    ``directory`` reads the turn's working directory from the host's own field; when the payload
    has none, the host's project variable names it, and last the directory the host started the
    hook in (``PWD``: hosts run hooks through a shell, in the project)."""
    raw_name = payload.get("hook_event_name")
    name = raw_name if isinstance(raw_name, str) else ""
    kind = event_kind(name)
    prompt = first_text(payload, *prompt_keys) if kind is EventKind.PROMPT_SUBMIT else ""
    cwd = directory(payload).strip() or _env_dir(env or {}, project_dir_env)
    workspace = workspace_of(cwd)
    return HookEvent(
        host=host,
        kind=kind,
        event_name=name[:64],
        session_key=sanitise_key(first_text(payload, *session_keys), SESSION_KEY_LIMIT),
        turn_id=sanitise_key(first_text(payload, *turn_keys), TURN_ID_LIMIT) if turn_keys else "",
        prompt=prompt,
        cwd=cwd,
        stop_active=_stop_active(payload),
        workspace=workspace.key if workspace else "",
        answer=first_text(payload, "last_assistant_message") if kind is EventKind.STOP else "",
    )


def payload_cwd(payload: dict[str, Any]) -> str:
    """The Claude-shaped ``cwd`` field."""
    return first_text(payload, "cwd")


def _env_dir(env: Mapping[str, str], names: tuple[str, ...]) -> str:
    for var in (*names, "PWD"):
        value = env.get(var, "").strip()
        if value:
            return value
    return ""


def _stop_active(payload: dict[str, Any]) -> bool:
    """Whether the host is already running a continuation we asked for (loop guard).

    Claude-family hosts send ``stop_hook_active``; Cursor sends ``loop_count`` (and runs
    Claude-format hooks with its own payload and no loop cap, so every adapter checks both).
    A Cursor stop that did not complete (aborted, error) must not be continued either.
    """
    if payload.get("stop_hook_active") is True:
        return True
    loop_count = payload.get("loop_count")
    if isinstance(loop_count, int) and not isinstance(loop_count, bool) and loop_count > 0:
        return True
    status = payload.get("status")
    return isinstance(status, str) and status not in ("", "completed")


def stop_reason(reply: HookReply) -> str:
    """The one text a Claude-family Stop continuation carries: what the user sees, then the
    instruction for the model (CodeBuddy IDE drops anything but ``reason`` on a continuation)."""
    return "\n\n".join(part for part in (reply.visible, reply.continuation) if part)


def render_claudelike(
    event: HookEvent,
    reply: HookReply,
    event_names: Mapping[EventKind, str],
    *,
    system_message: bool,
) -> dict[str, Any] | None:
    """Claude Code's output JSON; ``None`` means print nothing."""
    if event.kind in (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT):
        out: dict[str, Any] = {}
        if reply.context:
            # Always nested: a top-level additionalContext is dropped (Claude Code issue #52876).
            out["hookSpecificOutput"] = {
                "hookEventName": event_names[event.kind],
                "additionalContext": reply.context,
            }
        if system_message and reply.user_message:
            out["systemMessage"] = reply.user_message
        return out or None
    if event.kind is EventKind.STOP and not event.stop_active:
        reason = stop_reason(reply)
        if reason:
            # Never ``continue: false``: it ends a Claude Code session (and means "go on" in
            # CodeBuddy); ``decision: block`` continues in both.
            out = {"decision": "block", "reason": reason}
            if system_message and reply.user_message:
                out["systemMessage"] = reply.user_message
            return out
    # Sub-agent stops, repeated stops and unknown events get no answer.
    return None


def payload_parser(facts: HostFacts, directory: Callable[[dict[str, Any]], str] = payload_cwd) -> Parse:
    """The adapter's ``parse``: the payload read with the fields ``facts`` name; ``directory``
    reads the turn's working directory (``cwd`` unless the host names it otherwise)."""

    def parse(payload: dict[str, Any], env: Mapping[str, str] | None = None) -> HookEvent:
        return parse_event(
            facts.name,
            payload,
            env,
            session_keys=facts.session_keys,
            turn_keys=facts.turn_keys,
            prompt_keys=facts.prompt_keys,
            directory=directory,
            project_dir_env=facts.project_dir_env,
        )

    return parse


def claudelike_renderer(facts: HostFacts) -> Render:
    """The adapter's ``render`` for a host that speaks Claude Code's JSON."""

    def render(event: HookEvent, reply: HookReply) -> dict[str, Any] | None:
        return render_claudelike(event, reply, facts.event_names, system_message=facts.system_message)

    return render


def never_steps_aside(
    payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]
) -> bool:
    """The default: no other registration of ours answers for this host."""
    return False
