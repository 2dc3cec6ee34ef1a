"""``kept/ledger.json``: the check's daily spend and the per-workspace turn counts.

Serialised by a ``flock`` on ``kept/.lock`` (several checks may end at once). Turn counts are kept
per workspace key ("" for turns outside any) and per group, so ``memself stats`` can say how
much each turn was shown and how much of it was used, without a record per turn.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from memself.atomic import write_atomic
from memself.kept.turns import ensure_kept_dir, kept_dir
from memself.paths import DataPaths
from memself.timeutil import local_day

# The check's own daily budget: one request per checked turn, at most this many a day.
DAILY_REQUESTS = 200
DAILY_TOKENS = 600_000
TURN_FIELDS = ("turns", "rulesShown", "factsShown", "factsUsed", "rulesBroken")


def ledger_path(paths: DataPaths) -> Any:
    return kept_dir(paths) / "ledger.json"


@contextlib.contextmanager
def ledger_lock(paths: DataPaths) -> Iterator[None]:
    from memself.platform import files, locks

    ensure_kept_dir(paths)
    fd = os.open(kept_dir(paths) / ".lock", os.O_RDWR | os.O_CREAT | files.BINARY, 0o600)
    try:
        locks.exclusive(fd)
        yield
    finally:
        os.close(fd)


def load_ledger(paths: DataPaths) -> dict[str, Any]:
    try:
        data = json.loads(ledger_path(paths).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(paths: DataPaths, data: dict[str, Any]) -> None:
    write_atomic(ledger_path(paths), json.dumps(data, ensure_ascii=False, indent=1) + "\n", mode=0o600)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def charge(paths: DataPaths, now: datetime, tokens: int) -> bool:
    """Take one request of ``tokens`` from today's budget; False (nothing taken) when it is spent."""
    with ledger_lock(paths):
        data = load_ledger(paths)
        spend = _dict(data.get("spend"))
        day = local_day(now)
        requests, used = (
            (_int(spend.get("requests")), _int(spend.get("tokens"))) if spend.get("day") == day else (0, 0)
        )
        if requests + 1 > DAILY_REQUESTS or used + tokens > DAILY_TOKENS:
            return False
        data["spend"] = {"day": day, "requests": requests + 1, "tokens": used + tokens}
        _save(paths, data)
        return True


def spent_today(paths: DataPaths, now: datetime) -> tuple[int, int]:
    spend = load_ledger(paths).get("spend")
    if not isinstance(spend, dict) or spend.get("day") != local_day(now):
        return 0, 0
    return _int(spend.get("requests")), _int(spend.get("tokens"))


def add_turn(paths: DataPaths, workspace: str, counts: dict[str, int]) -> None:
    """One checked turn of ``workspace`` with what it was shown, used and broke."""
    with ledger_lock(paths):
        data = load_ledger(paths)
        spaces = _dict(data.get("workspaces"))
        found = _dict(spaces.get(workspace))
        row = {name: _int(found.get(name)) for name in TURN_FIELDS}
        row["turns"] += 1
        for name, value in counts.items():
            if name in row and name != "turns":
                row[name] += max(0, value)
        spaces[workspace] = row
        data["workspaces"] = spaces
        _save(paths, data)


def turn_rows(paths: DataPaths) -> dict[str, dict[str, int]]:
    spaces = load_ledger(paths).get("workspaces")
    if not isinstance(spaces, dict):
        return {}
    return {
        str(key): {name: _int(row.get(name)) for name in TURN_FIELDS}
        for key, row in spaces.items()
        if isinstance(row, dict)
    }
