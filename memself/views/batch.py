"""Which memories wait for "applies when" requests, the batches they are asked in, and what of an
answer is kept.

A memory waits when it is active and has no requests, or when its requests are stale: its text
changed since they were seen while they stayed the same (``state.seen``). Deprecated memories
are never recalled, so they are never asked for. A batch holds memories of one workspace only
(or only global ones), so no repository's facts are sent beside another's or can colour the
requests written for it.

Everything sent is one clean line of the memory's text, redacted (``text.redact.redact``) and
inert (``texts.inert``). Of an
answer, only the batch's own ids are read; a request is dropped, not stored, when it is empty,
longer than a stored request may be, carries anything redaction would hide, or restates the
memory. A memory left with none counts as a failed attempt and is asked again another day.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memself.judge.parse import extract_json
from memself.store.records import (
    MAX_APPLIES_WHEN,
    MAX_APPLIES_WHEN_TEXT,
    Memory,
    dedup_key,
    one_line,
    read_applies_when,
)
from memself.text.messages import inert
from memself.text.redact import redact
from memself.views import prompts
from memself.views.budget import ANSWER_RESERVE_PER_MEMORY, estimate_tokens
from memself.views.state import ViewsState, fingerprint, requests_fingerprint

BATCH_SIZE = 8
# Of a memory's answer list, only this many items are even looked at.
_SCANNED = 4 * MAX_APPLIES_WHEN
# A request at least this long (normalised) whose character pairs nearly all occur in the
# memory's text says the memory again rather than a task it matters for.
_RESTATE_MIN = 8
_RESTATE_SHARE = 0.8


@dataclass(frozen=True)
class Waiting:
    memory: Memory
    stale: bool  # it has requests, written for an older text


@dataclass(frozen=True)
class Batch:
    items: tuple[Waiting, ...]
    sent_texts: tuple[str, ...]  # what is sent of each memory's text (redacted)
    system: str
    user: str

    @property
    def ids(self) -> list[str]:
        return [w.memory.id for w in self.items]

    @property
    def charge(self) -> int:
        """Tokens charged before sending: the prompt and a reserve for the answer."""
        return estimate_tokens(self.system + self.user) + ANSWER_RESERVE_PER_MEMORY * len(self.items)


def is_stale(memory: Memory, state: ViewsState) -> bool:
    seen = state.seen.get(memory.id)
    if not memory.appliesWhen or seen is None:
        return False
    return seen[1] == requests_fingerprint(memory.appliesWhen) and seen[0] != fingerprint(memory.text)


def waiting(memories: Iterable[Memory], state: ViewsState) -> list[Waiting]:
    """Active memories without requests or with stale ones, in store order."""
    out = []
    for memory in memories:
        if not memory.active:
            continue
        if not memory.appliesWhen:
            out.append(Waiting(memory, False))
        elif is_stale(memory, state):
            out.append(Waiting(memory, True))
    return out


def observe(memories: Sequence[Memory], state: ViewsState) -> None:
    """Note the text and requests of every memory that has current requests; forget the ids that
    are gone, so the state stays the size of the store."""
    present = set()
    for memory in memories:
        present.add(memory.id)
        if memory.appliesWhen and not is_stale(memory, state):
            state.seen[memory.id] = [fingerprint(memory.text), requests_fingerprint(memory.appliesWhen)]
    for mem_id in [k for k in state.seen if k not in present]:
        del state.seen[mem_id]
    for mem_id in [k for k in state.failed if k not in present]:
        del state.failed[mem_id]
    state.inflight = [i for i in state.inflight if i in present]


def sent_text(memory: Memory) -> str:
    """What may leave the machine of a memory's text: one clean line, redacted, and inert as any
    model reads a memory (no tag, turn label or marker in it can act on the endpoint's model)."""
    return inert(redact(one_line(memory.text)))


def batches(
    items: Sequence[Waiting], state: ViewsState, now: datetime, size: int = BATCH_SIZE
) -> list[Batch]:
    """The memories to ask for, fewest failed attempts first, in batches of one workspace each;
    a memory that failed today waits for tomorrow."""
    ready = [w for w in items if not state.failed_today(w.memory.id, now)]
    order = {w.memory.id: i for i, w in enumerate(ready)}
    ready.sort(key=lambda w: (state.tries(w.memory.id), order[w.memory.id]))
    by_workspace: dict[str, list[Waiting]] = {}
    for w in ready:
        by_workspace.setdefault(w.memory.workspace, []).append(w)
    out = []
    for group in by_workspace.values():
        for start in range(0, len(group), size):
            out.append(make_batch(group[start : start + size]))
    out.sort(key=lambda b: min(state.tries(i) for i in b.ids))
    return out


def make_batch(items: Sequence[Waiting]) -> Batch:
    texts = tuple(sent_text(w.memory) for w in items)
    user = prompts.fill_user_message(
        [(w.memory.id, w.memory.category, t) for w, t in zip(items, texts, strict=True)]
    )
    return Batch(tuple(items), texts, prompts.FILL_SYSTEM, user)


def read_answer(answer: str, batch: Batch) -> dict[str, tuple[str, ...]]:
    """The requests kept per memory of ``batch`` (ids with none kept are absent)."""
    data = extract_json(answer)
    if data is None:
        return {}
    out = {}
    for w, text in zip(batch.items, batch.sent_texts, strict=True):
        kept = checked_requests(data.get(w.memory.id), text)
        if kept:
            out[w.memory.id] = kept
    return out


def checked_requests(value: object, memory_text: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    kept = []
    for item in value[:_SCANNED]:
        if not isinstance(item, str):
            continue
        line = one_line(item)
        if not 2 <= len(line) <= MAX_APPLIES_WHEN_TEXT:
            continue
        if redact(line) != line or restates(line, memory_text):
            continue
        kept.append(line)
    return read_applies_when(kept)


def restates(request: str, memory_text: str) -> bool:
    ask, text = dedup_key(request), dedup_key(memory_text)
    if not ask or ask == text or text in ask:
        return True
    if len(ask) < _RESTATE_MIN:
        return False
    pairs = {ask[i : i + 2] for i in range(len(ask) - 1)}
    known = {text[i : i + 2] for i in range(len(text) - 1)}
    return len(pairs & known) >= _RESTATE_SHARE * len(pairs)
