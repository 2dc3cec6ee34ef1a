"""Write one decision taken from a judge proposal into the store (standard library only).

Used by the judge (no-confirm mode), by Stop (proposals left from a confirm-on period when
confirm is now off) and by ``memory_resolve``. Text, target and merged text always come from the
proposal, never from a caller, and so do the memory's appliesWhen requests: the new statement's
(``appliesWhen``) for create, replace and a reinforce of a memory that has none, the merged text's
(``mergedAppliesWhen``) for merge. A proposal without them (the original's) changes no requests.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memself.errors import MemselfError
from memself.records import read_applies_when
from memself.store import MemoryStore
from memself.texts import direct_line, duplicate_line, resolve_notice


def apply_proposal(
    store: MemoryStore,
    proposal: dict[str, Any],
    action: str,
    group: str,
    now: datetime,
    *,
    resolve_style: bool = False,
) -> str:
    """Apply ``action`` (create | reinforce | merge | replace) and return the result line.

    Replace writes the new statement itself over the old one (never a model rewrite), with the
    confidence unchanged. ``resolve_style`` picks memory_resolve's notice wording.
    """
    text = str(proposal["text"])
    target = str(proposal.get("targetId") or "")
    line = resolve_notice if resolve_style else direct_line
    requests = read_applies_when(proposal.get("appliesWhen"))
    if action == "create":
        added = store.add(text, group, now, str(proposal.get("evidence") or ""), requests)
        if added.duplicate:
            memory = added.memory
            return duplicate_line(memory.text, memory.category, added.gain, resolve_style)
        return line("create", added.memory.text, added.memory.category)
    if action == "reinforce":
        change = store.reinforce(target, now, fill_applies_when=requests)
        return line("reinforce", change.memory.text, change.memory.category, change.gain)
    if action == "merge":
        merged = read_applies_when(proposal.get("mergedAppliesWhen"))
        change = store.merge_into(target, str(proposal["mergedText"]), now, merged)
        return line("merge", change.memory.text, change.memory.category, change.gain, change.previous_text)
    if action == "replace":
        change = store.replace(target, text, now, requests)
        return line("replace", change.memory.text, change.memory.category, previous=change.previous_text)
    raise MemselfError(f"未知的记忆动作「{action}」")
