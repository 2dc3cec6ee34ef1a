"""What the filler of "applies when" requests keeps on disk: ``views/state.json``.

- today's spend (requests and estimated tokens), charged before a request is sent, so a process
  killed while one is in flight has already paid for it and no restart can overspend the day;
- the batch in flight (its memory ids): a run that finds one left by a killed run logs it and asks
  for those memories again (nothing was written for them, or what was is kept as written);
- per memory, the day of its last failed attempt and how many there were: a memory the endpoint
  answered badly waits for the next day, so it cannot eat the whole budget;
- per memory, fingerprints of the text and the requests it was last seen with: a text that changed
  while its requests stayed the same (an edit outside memself, the original plugin) makes them
  stale, and they are asked for again.

Written whole and atomically (``write_atomic``); an unreadable file is set aside, never trusted
or silently reset under a reader: spend it cannot read counts as the whole day's budget.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.logs import log
from memself.paths import DataPaths
from memself.timeutil import local_day

VERSION = 1


def views_dir(paths: DataPaths) -> Path:
    return paths.root / "views"


def state_path(paths: DataPaths) -> Path:
    return views_dir(paths) / "state.json"


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


def requests_fingerprint(requests: tuple[str, ...]) -> str:
    return fingerprint("\n".join(requests))


@dataclass
class ViewsState:
    day: str = ""
    requests: int = 0
    tokens: int = 0
    inflight: list[str] = field(default_factory=list)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"day", "tries"}
    seen: dict[str, list[str]] = field(default_factory=dict)  # id -> [text fp, requests fp]
    unreadable: bool = False  # the file was there but could not be used

    def spend_today(self, now: datetime) -> tuple[int, int]:
        return (self.requests, self.tokens) if self.day == local_day(now) else (0, 0)

    def charge(self, now: datetime, requests: int, tokens: int) -> None:
        today = local_day(now)
        if self.day != today:
            self.day, self.requests, self.tokens = today, 0, 0
        self.requests += requests
        self.tokens = max(0, self.tokens + tokens)

    def failed_today(self, mem_id: str, now: datetime) -> bool:
        entry = self.failed.get(mem_id)
        return isinstance(entry, dict) and entry.get("day") == local_day(now)

    def tries(self, mem_id: str) -> int:
        entry = self.failed.get(mem_id)
        value = entry.get("tries") if isinstance(entry, dict) else 0
        return value if isinstance(value, int) else 0

    def note_failure(self, mem_id: str, now: datetime) -> None:
        self.failed[mem_id] = {"day": local_day(now), "tries": self.tries(mem_id) + 1}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "day": self.day,
            "requests": self.requests,
            "tokens": self.tokens,
            "inflight": self.inflight,
            "failed": self.failed,
            "seen": self.seen,
        }


def load_state(paths: DataPaths) -> ViewsState:
    path = state_path(paths)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ViewsState()
    except (OSError, ValueError) as exc:
        log(paths, "views-state-unreadable", error=str(exc))
        return ViewsState(unreadable=True)
    if not isinstance(raw, dict):
        return ViewsState(unreadable=True)
    state = ViewsState(
        day=_str(raw.get("day")),
        requests=_count(raw.get("requests")),
        tokens=_count(raw.get("tokens")),
        inflight=[i for i in _list(raw.get("inflight")) if isinstance(i, str)],
        failed={k: v for k, v in _dict(raw.get("failed")).items() if isinstance(v, dict)},
        seen={
            k: v
            for k, v in _dict(raw.get("seen")).items()
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
        },
    )
    return state


def save_state(paths: DataPaths, state: ViewsState) -> None:
    """Atomically; an unreadable file is renamed aside first, so the user can still look at it."""
    path = state_path(paths)
    paths.ensure()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    if state.unreadable:
        with contextlib.suppress(OSError):
            os.replace(path, path.with_name(f"state.json.unreadable-{os.getpid()}"))
        state.unreadable = False
    write_atomic(path, json.dumps(state.to_json(), ensure_ascii=False) + "\n")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
