"""Read the judge's answers. Anything that is not the expected JSON means "do not remember".

JSON is looked for the way the original did (§4.5): the whole body, a ``structured_output`` or
``result`` wrapper, a json code fence, then the first ``{`` to the last ``}``.

``appliesWhen`` (the everyday requests a memory matters for) is optional: the original's answers
have none, and a missing or malformed one is simply no requests, never an unusable answer.
``scope`` too: a missing or unknown one is the group's usual scope (a rule global, a project fact
the workspace's), never an unusable answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memself.store.records import (
    GLOBAL,
    GROUPS,
    MAX_APPLIES_WHEN,
    MAX_APPLIES_WHEN_TEXT,
    one_line,
    read_applies_when,
    read_scope,
)
from memself.text.redact import redact

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_ACTIONS = ("create", "reinforce", "merge", "replace")
_SCANNED_REQUESTS = 4 * MAX_APPLIES_WHEN


@dataclass(frozen=True)
class RememberAnswer:
    remember: bool
    text: str = ""
    group: str = "rule"
    evidence: str = ""
    applies_when: tuple[str, ...] = ()
    scope: str = GLOBAL  # global | workspace: where the memory belongs when the turn has a workspace


@dataclass(frozen=True)
class DedupAnswer:
    action: str  # create | reinforce | merge | replace | unsure
    target_id: str = ""
    merged_text: str = ""
    applies_when: tuple[str, ...] = ()  # for the merged text


def extract_json(text: str) -> dict[str, object] | None:
    """The first JSON object found in ``text``, unwrapped; ``None`` when there is none."""
    for candidate in _candidates(text):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        value = _unwrap(value)
        if isinstance(value, dict):
            return value
    return None


def _candidates(text: str) -> list[str]:
    stripped = text.strip()
    found = [stripped]
    found += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        found.append(stripped[start : end + 1])
    return found


def _unwrap(value: object) -> object:
    # Agent-style gateways wrap the model's answer: {"structured_output": {...}} or {"result": "..."}.
    for _ in range(3):
        if not isinstance(value, dict):
            return value
        for key in ("structured_output", "result"):
            inner = value.get(key)
            if isinstance(inner, dict):
                value = inner
                break
            if isinstance(inner, str) and "remember" not in value and "action" not in value:
                parsed = extract_json(inner)
                if parsed is not None:
                    value = parsed
                    break
        else:
            return value
    return value


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def applies_when(value: object) -> tuple[str, ...]:
    """The judge's requests as a memory keeps them: a list's string items, redacted like the
    prompt the judge was sent (the model may still invent a password for an example), then
    bounded as a write is (``records.check_applies_when``). Anything else is no requests."""
    if not isinstance(value, list):
        return ()
    # Only a few items of write length are worth redacting: the rest would be dropped anyway.
    lines = [one_line(item) for item in value[:_SCANNED_REQUESTS] if isinstance(item, str)]
    return read_applies_when([redact(line) for line in lines if len(line) <= MAX_APPLIES_WHEN_TEXT])


def parse_remember(text: str) -> RememberAnswer | None:
    """The remember decision, or ``None`` when the answer is unusable (a parse failure)."""
    data = extract_json(text)
    if data is None:
        return None
    remember = _as_bool(data.get("remember"))
    if remember is None:
        return None
    if not remember:
        return RememberAnswer(False)
    body = _text(data.get("text"))
    if not body:
        return None  # remember:true without a text is not an answer
    group = _text(data.get("group")) or _text(data.get("category"))
    group = group if group in GROUPS else "rule"
    return RememberAnswer(
        True,
        body,
        group,
        _text(data.get("evidence")),
        applies_when(data.get("appliesWhen")),
        read_scope(data.get("scope"), group),
    )


def parse_dedup(text: str, candidate_ids: Sequence[str]) -> DedupAnswer:
    """The dedup decision; an unknown id or an unparseable answer is ``unsure``."""
    data = extract_json(text)
    if data is None:
        return DedupAnswer("unsure")
    action = _text(data.get("action")).lower()
    if action == "create":
        return DedupAnswer("create")
    if action not in _ACTIONS:
        return DedupAnswer("unsure")
    target = _text(data.get("id"))
    if target not in candidate_ids:
        return DedupAnswer("unsure")
    if action == "merge":
        merged = _text(data.get("text"))
        if not merged:
            return DedupAnswer("unsure")
        return DedupAnswer("merge", target, merged, applies_when(data.get("appliesWhen")))
    return DedupAnswer(action, target)
