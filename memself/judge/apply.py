"""Write one decision taken from a judge proposal into the store (standard library only).

Used by the judge (no-confirm mode), by Stop (proposals left from a confirm-on period when
confirm is now off) and by ``memory_resolve``. Text, target and merged text always come from the
proposal, never from a caller, and so do the memory's appliesWhen requests: the new statement's
(``appliesWhen``) for create, replace and a reinforce of a memory that has none, the merged text's
(``mergedAppliesWhen``) for merge. A proposal without them (the original's) changes no requests.

Where a create lands comes from the job, never from the proposal: the turn's workspace sealed in
the job (``jobs.job_workspace``) when the scope is ``workspace`` or ``team``, else global. Reinforce,
merge and replace keep the target's scope. A ``team`` create the user chose (``share_team``) is
also appended to the repository's ``.memself/`` (``memself.share``), never committed; without a
choice (confirmation off), or outside a git repository, it stays the workspace's, and the line
says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memself.errors import InvalidInput, MemselfError
from memself.share import share_memory
from memself.store import team
from memself.store.memory_store import MemoryStore
from memself.store.records import TEAM, WORKSPACE, Memory, read_applies_when, read_scope
from memself.store.workspaces import Workspace
from memself.text.messages import (
    TEAM_FALLBACK_NOTE,
    direct_line,
    duplicate_line,
    resolve_notice,
    team_not_asked_note,
    team_refused_note,
    team_shared_note,
)


def proposal_scope(proposal: dict[str, Any]) -> str:
    """The scope the judge recommended (``global`` | ``workspace``); a proposal without one (a
    turn without a workspace, the original's) reads as its group's usual scope."""
    return read_scope(proposal.get("scope"), proposal.get("category") or "rule")


def apply_proposal(
    store: MemoryStore,
    proposal: dict[str, Any],
    action: str,
    group: str,
    now: datetime,
    *,
    resolve_style: bool = False,
    turn: Workspace | None = None,
    create_scope: str = "",
    share_team: bool = False,
) -> str:
    """Apply ``action`` (create | reinforce | merge | replace) and return the result line.

    Replace writes the new statement itself over the old one (never a model rewrite), with the
    confidence unchanged. ``resolve_style`` picks memory_resolve's notice wording. ``turn`` is the
    workspace of the judged turn (None: none, and everything is global); a create goes into it
    when ``create_scope`` (default: the proposal's) is ``workspace``. When the turn had a
    workspace, or the memory has one, the line says where the memory applies.
    """
    text = str(proposal["text"])
    target = str(proposal.get("targetId") or "")
    line = resolve_notice if resolve_style else direct_line
    requests = read_applies_when(proposal.get("appliesWhen"))

    def where(memory: Memory) -> str | None:
        if turn is None and not memory.workspace:
            return None
        return memory.workspaceName if memory.workspace else ""

    if action == "create":
        scope = create_scope or proposal_scope(proposal)
        into = turn if turn is not None and scope in (WORKSPACE, TEAM) else None
        added = store.add(text, group, now, str(proposal.get("evidence") or ""), requests, workspace=into)
        memory = added.memory
        if added.duplicate:
            result = duplicate_line(memory.text, memory.category, added.gain, resolve_style, where(memory))
        else:
            result = line("create", memory.text, memory.category, scope=where(memory))
        if scope == TEAM and into is not None:
            result += _team_note(memory, into.key, share_team)
        return result
    if action == "reinforce":
        change = store.reinforce(target, now, fill_applies_when=requests)
        memory = change.memory
        return line("reinforce", memory.text, memory.category, change.gain, scope=where(memory))
    if action == "merge":
        merged = read_applies_when(proposal.get("mergedAppliesWhen"))
        change = store.merge_into(target, str(proposal["mergedText"]), now, merged)
        memory = change.memory
        return line("merge", memory.text, memory.category, change.gain, change.previous_text, where(memory))
    if action == "replace":
        change = store.replace(target, text, now, requests)
        memory = change.memory
        return line(
            "replace", memory.text, memory.category, previous=change.previous_text, scope=where(memory)
        )
    raise MemselfError(f"未知的记忆动作「{action}」")


def _team_note(memory: Memory, root: str, share_team: bool) -> str:
    """Share the memory the user put in the team scope; what happened, for its result line."""
    if not team.is_repository(root):
        return TEAM_FALLBACK_NOTE
    if not share_team:
        return team_not_asked_note(memory.id)
    try:
        shared = share_memory(memory, root)
    except (InvalidInput, OSError) as exc:
        return team_refused_note(str(exc))
    return team_shared_note(shared.root, shared.relative, shared.already)
