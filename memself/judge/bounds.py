"""Every field the judge supplies, bounded and normalised in one place before it is kept.

The endpoint is outside the machine's trust: a broken or hostile one may answer with a megabyte
in any field, controls, line breaks or types nobody asked for. A proposal is rebuilt here from
the fields memself knows, each cleaned as the store would keep it (one line, the store's
length limits, the judge's requests bounded and redacted like the prompt it was sent), and
nothing else is carried: the job file, the popup and the memory written from it are all built
from what this returns. The store bounds its lines again on every write
(``memself.store.recordlines``), whoever the writer is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memself.store.records import (
    GROUPS,
    MAX_TEXT,
    check_evidence,
    one_line,
    read_applies_when,
    read_scope,
)
from memself.text.redact import redact

ACTIONS = ("create", "reinforce", "merge", "replace", "unsure")
# Memory ids are ``mem-<base36 time>-<6 chars>``; the original's and hand-made ones are short too.
MAX_ID = 128


def bounded_proposal(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The proposal with every field bounded and normalised, unknown fields dropped.

    Optional fields (``appliesWhen``, ``mergedAppliesWhen``, ``scope``) stay absent when absent,
    so a proposal without them keeps the original's shape."""
    category = raw.get("category")
    group = category if category in GROUPS else "rule"
    action = raw.get("action")
    out: dict[str, Any] = {
        "text": bounded_text(raw.get("text")),
        "evidence": check_evidence(redact(bounded_text(raw.get("evidence"), MAX_TEXT * 2))),
        "category": group,
        "action": action if action in ACTIONS else "unsure",
        "targetId": bounded_text(raw.get("targetId"), MAX_ID),
        "targetText": bounded_text(raw.get("targetText")),
        "targetCategory": raw.get("targetCategory") if raw.get("targetCategory") in GROUPS else "",
        "mergedText": bounded_text(raw.get("mergedText")),
        "score": _score(raw.get("score")),
    }
    for name in ("appliesWhen", "mergedAppliesWhen"):
        requests = read_applies_when(raw.get(name))
        if requests:
            out[name] = list(requests)
    if "scope" in raw:
        out["scope"] = read_scope(raw.get("scope"), group)
    return out


def bounded_text(value: object, limit: int = MAX_TEXT) -> str:
    """A string field as one line of at most ``limit`` characters ("" for anything else). Only
    a prefix is looked at: a megabyte is not worth cleaning to keep its first lines."""
    if not isinstance(value, str):
        return ""
    return one_line(value[: limit * 4])[:limit]


def _score(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return round(number, 4) if math.isfinite(number) and -1.0 <= number <= 1.0 else None
