"""At Stop: hand the turn's final answer to a detached check, and return at once.

Standard library only (the Stop hook runs under ``python -I -S``). The answer is bounded and
redacted here, before it touches the disk, and the check removes its hand-off file as soon as
it has read it: no answer text is kept. A turn without an answer (the user interrupted it, or
the host gives none) is not checked, so nothing is counted for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.hosts.base import HookEvent
from memself.kept.turns import ensure_kept_dir, take_shown
from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.timeutil import iso

# The part of an answer a check reads: its start and its end (where a language or a closing
# habit shows), never a megabyte.
ANSWER_HEAD = 3000
ANSWER_TAIL = 1000
# A hand-off nobody took (the check could not start) is removed by the next Stop after this;
# a session's note or notice nobody took (the session ended) after a day.
STALE_AFTER_S = 3600.0
SESSION_FILES_AFTER_S = 86400.0
SWITCH_ENV = "MEMSELF_KEPT"  # "0": no check is started (test suites that do not test it)

Spawner = Callable[[list[str]], object]


def bounded_answer(answer: str) -> str:
    """The answer's start and end, redacted as every judge input is."""
    from memself.text.redact import redact

    text = answer.replace("\r\n", "\n").strip()
    if len(text) > ANSWER_HEAD + ANSWER_TAIL:
        text = text[:ANSWER_HEAD] + "\n…\n" + text[-ANSWER_TAIL:]
    return redact(text)


def check_command(paths: DataPaths, handoff: Path) -> list[str]:
    """An isolated interpreter (``memself.launcher``): nothing from the working directory or
    PYTHONPATH is imported."""
    return python_command("memself.kept.run", str(paths.root), str(handoff))


def maybe_start_check(
    paths: DataPaths,
    event: HookEvent,
    now: datetime,
    rules_in_force: Callable[[], int],
    learning: Callable[[], bool],
    spawn: Spawner | None = None,
) -> Path | None:
    """Start the check of this turn's answer; the hand-off file, or None when there is nothing
    to check: no answer, no session, or neither a recalled memory nor a rule the judge could
    check. ``rules_in_force`` and ``learning`` are asked only when it matters (they read the
    store and the key)."""
    if os.environ.get(SWITCH_ENV, "").strip() == "0" or not event.session_key:
        return None
    shown = take_shown(paths, event.host, event.session_key, event.turn_id)
    if not event.answer.strip():
        if shown:
            log(paths, "kept-no-answer", agent=event.host)
        return None
    if not shown and not (learning() and rules_in_force()):
        return None
    folder = ensure_kept_dir(paths)
    _prune(folder)
    body: dict[str, Any] = {
        "host": event.host,
        "sessionKey": event.session_key,
        "turn": event.turn_id,
        "workspace": event.workspace,
        "shown": shown,
        "answer": bounded_answer(event.answer),
        "at": iso(now),
    }
    handoff = folder / f"check-{os.getpid()}-{time.monotonic_ns()}.json"
    write_atomic(handoff, json.dumps(body, ensure_ascii=False) + "\n", mode=0o600)
    try:
        (spawn or _spawn)(check_command(paths, handoff))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(handoff)
        log(paths, "kept-start-failed", error=str(exc))
        return None
    return handoff


def _spawn(argv: list[str]) -> int:
    from memself import children
    from memself.platform import children as platform_children

    pid = platform_children.spawn_detached(argv, dict(os.environ))
    children.track(pid)
    return pid


def _prune(folder: Path) -> None:
    now = time.time()
    limits = {"check-": STALE_AFTER_S, "shown-": SESSION_FILES_AFTER_S, "notice-": SESSION_FILES_AFTER_S}
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            limit = next((v for k, v in limits.items() if entry.name.startswith(k)), None)
            if limit is not None and entry.stat().st_mtime < now - limit:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
