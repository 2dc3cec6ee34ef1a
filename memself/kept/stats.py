"""What ``memself stats`` and the page show: per workspace and per group, how much each turn was
shown, how much of it was used, which rules were broken, and the memories shown most and used
least. Built from the ledger's turn counts and the counts on the memories; no answer is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memself.kept import counts as fields
from memself.kept.ledger import TURN_FIELDS
from memself.store.records import Memory
from memself.store.workspaces import display_name

TOP = 5


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _per_turn(total: int, turns: int) -> float | None:
    return round(total / turns, 2) if turns else None


def _item(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "group": memory.category,
        "text": memory.text,
        "workspace": memory.workspace or None,
        "shown": fields.count(memory, fields.SHOWN),
        "used": fields.count(memory, fields.USED),
        "broken": fields.count(memory, fields.BROKEN),
    }


def build_stats(rows: Mapping[str, Mapping[str, int]], memories: Sequence[Memory]) -> dict[str, Any]:
    names = {m.workspace: m.workspaceName for m in memories if m.workspace}
    spaces = []
    for key in sorted(rows, key=lambda k: (k != "", k)):
        row = {name: int(rows[key].get(name, 0)) for name in TURN_FIELDS}
        turns = row["turns"]
        spaces.append(
            {
                "workspace": key or None,
                "workspaceName": (names.get(key) or display_name(key)) if key else None,
                **row,
                "rulesPerTurn": _per_turn(row["rulesShown"], turns),
                "factsPerTurn": _per_turn(row["factsShown"], turns),
                "usedShare": _share(row["factsUsed"], row["factsShown"]),
            }
        )
    total = {name: sum(int(r.get(name, 0)) for r in rows.values()) for name in TURN_FIELDS}
    facts = [m for m in memories if m.category == "project"]
    rules = [m for m in memories if m.category == "rule"]
    shown = sum(fields.count(m, fields.SHOWN) for m in facts)
    used = sum(fields.count(m, fields.USED) for m in facts)
    seen = [m for m in facts if fields.count(m, fields.SHOWN)]
    broken = [m for m in rules if fields.count(m, fields.BROKEN)]
    return {
        "turns": total["turns"],
        "groups": {
            "rule": {
                "shown": total["rulesShown"],
                "perTurn": _per_turn(total["rulesShown"], total["turns"]),
                "broken": sum(fields.count(m, fields.BROKEN) for m in rules),
            },
            "project": {
                "shown": shown,
                "used": used,
                "perTurn": _per_turn(total["factsShown"], total["turns"]),
                "usedShare": _share(used, shown),
            },
        },
        "workspaces": spaces,
        "shownMost": [
            _item(m) for m in sorted(seen, key=lambda m: (-fields.count(m, fields.SHOWN), m.id))[:TOP]
        ],
        "usedLeast": [
            _item(m)
            for m in sorted(
                seen,
                key=lambda m: (
                    fields.count(m, fields.USED) / fields.count(m, fields.SHOWN),
                    -fields.count(m, fields.SHOWN),
                    m.id,
                ),
            )[:TOP]
        ],
        "brokenMost": [
            {**_item(m), "advice": fields.advice(m)}
            for m in sorted(broken, key=lambda m: (-fields.count(m, fields.BROKEN), m.id))[:TOP]
        ],
    }


def load_stats(paths: Any, memories: Sequence[Memory]) -> dict[str, Any]:
    from memself.kept.ledger import turn_rows

    return build_stats(turn_rows(paths), memories)
