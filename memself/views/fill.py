"""Ask the judge endpoint for the "applies when" requests of memories that have none (or stale
ones), a batch per request, within today's budget, and write them through the store.

One run at a time per data directory (an ``flock`` on ``views/fill.lock``, dropped by the kernel
however the run ends). Per batch: the spend is charged and the batch noted as in flight on disk,
then the request is sent, then the kept requests are written in one store write (only to
memories still as they were when asked about), then the state is saved. A kill at any point
loses nothing: before the store write nothing was written and the memories still wait; after
it they have their requests, and the next run only notes them. Nothing is sent without an
endpoint, a model and a key bound to that endpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memself.config import Config
from memself.errors import KeyEndpointMismatch, KeyFileInvalid, KeyUnconfirmed, MemselfError
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.views.batch import Batch, batches, make_batch, observe, read_answer, waiting
from memself.views.budget import ANSWER_RESERVE_PER_MEMORY, estimate_tokens, today_budget
from memself.views.state import (
    ViewsState,
    fingerprint,
    load_state,
    requests_fingerprint,
    save_state,
    views_dir,
)

ChatFn = Callable[[str, str], str]  # (system, user) -> assistant text
DEFAULT_TIMEOUT_S = 70.0
# A batch's answer is a few KiB (a stream of it some tens): far less than the judge's own cap.
MAX_ANSWER_BYTES = 256 * 1024

# Why a run stopped (``FillReport.stopped``).
DONE, LIMIT, BUDGET, NO_ENDPOINT, KEY, ENDPOINT_ERROR, BUSY, STATE = (
    "done",
    "limit",
    "budget",
    "no-endpoint",
    "key",
    "endpoint-error",
    "busy",
    "state-unreadable",
)


@dataclass
class FillReport:
    stopped: str = DONE
    detail: str = ""  # the endpoint's error, or why the key is unusable (never the key)
    requests: int = 0  # requests sent (or, in a dry run, that would be)
    filled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # dry run: each request as sent


def endpoint_configured(config: Config) -> bool:
    return bool(str(config.sideApiBase or "").strip() and str(config.sideApiModel or "").strip())


@contextlib.contextmanager
def fill_lock(paths: DataPaths) -> Iterator[bool]:
    """True when this process holds the run lock for the block, False when another run does."""
    folder = views_dir(paths)
    paths.ensure()
    folder.mkdir(mode=0o700, exist_ok=True)
    from memself.platform import files, locks

    fd = os.open(folder / "fill.lock", os.O_RDWR | os.O_CREAT | files.CLOEXEC | files.BINARY, 0o600)
    try:
        if not locks.try_exclusive(fd):
            yield False
            return
        yield True
    finally:
        os.close(fd)


def request_body(model: str, system: str, user: str) -> dict[str, Any]:
    """The JSON body ``judge.http.chat`` posts, for the dry run to show."""
    return {
        "model": model,
        "stream": True,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


def run_fill(
    paths: DataPaths,
    config: Config,
    now_fn: Callable[[], datetime],
    *,
    limit: int | None = None,
    dry_run: bool = False,
    chat: ChatFn | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> FillReport:
    """One run; ``chat`` replaces the endpoint call (the key-bound ``judge.http.chat`` by default)."""
    if dry_run:
        return _run(paths, config, now_fn, limit, None, timeout, dry_run=True)
    with fill_lock(paths) as held:
        if not held:
            return FillReport(BUSY)
        return _run(paths, config, now_fn, limit, chat, timeout, dry_run=False)


def _run(
    paths: DataPaths,
    config: Config,
    now_fn: Callable[[], datetime],
    limit: int | None,
    chat: ChatFn | None,
    timeout: float,
    *,
    dry_run: bool,
) -> FillReport:
    report = FillReport()
    state = load_state(paths)
    now = now_fn()
    if state.unreadable and not dry_run:
        # Spend it cannot read counts as spent: the day's budget can never be overrun this way.
        state.day, state.requests, state.tokens = "", 0, 0
        state.charge(now, int(config.viewsDailyRequests), int(config.viewsDailyTokens))
        save_state(paths, state)
        report.stopped = STATE
        return report
    if state.inflight and not dry_run:
        log(paths, "views-batch-redone", ids=",".join(state.inflight))
        state.inflight = []
    store = MemoryStore(paths)
    memories = store.all()
    observe(memories, state)
    todo = batches(waiting(memories, state), state, now)
    if not dry_run and not todo:
        save_state(paths, state)
        return report
    send: ChatFn | None = chat
    if not dry_run and send is None:
        send, problem = _endpoint(paths, config, timeout)
        if send is None:
            report.stopped, report.detail = problem
            save_state(paths, state)
            return report
    spent_requests, spent_tokens = 0, 0  # a dry run's own tally: nothing is charged
    left = limit
    for batch in todo:
        if left is not None and left <= 0:
            report.stopped = LIMIT
            break
        if left is not None and len(batch.items) > left:
            batch = make_batch(batch.items[:left])
        budget = today_budget(config, state, now)
        if budget.requests_left - spent_requests < 1 or batch.charge > budget.tokens_left - spent_tokens:
            report.stopped = BUDGET
            break
        if left is not None:
            left -= len(batch.items)
        if dry_run:
            report.requests += 1
            spent_requests, spent_tokens = spent_requests + 1, spent_tokens + batch.charge
            report.bodies.append(request_body(str(config.sideApiModel or ""), batch.system, batch.user))
            continue
        assert send is not None
        if not _ask(paths, store, state, batch, send, now_fn, report):
            break
        now = now_fn()
    return report


def _endpoint(paths: DataPaths, config: Config, timeout: float) -> tuple[ChatFn | None, tuple[str, str]]:
    """The key-bound call, or why there is none; nothing is sent without all three parts."""
    if not config.enabled:
        return None, (NO_ENDPOINT, "memself 已关闭（enabled=false）")
    if not endpoint_configured(config):
        return None, (NO_ENDPOINT, "")
    from memself.judge.credentials import key_for_endpoint
    from memself.judge.http import chat

    try:
        api_key, base = key_for_endpoint(paths, str(config.sideApiBase))
    except KeyEndpointMismatch:
        return None, (KEY, "apiKey 不是为当前 sideApiBase 录入的，为防密钥外泄没有发送任何请求")
    except KeyFileInvalid:
        return None, (KEY, "apiKey 没有配置或不可用")
    except KeyUnconfirmed:
        return None, (
            KEY,
            "apiKey 是原插件格式，还没有确认发往的地址；"
            "在终端运行 memself doctor 确认，或运行 memself key set",
        )
    except (MemselfError, OSError) as exc:
        return None, (KEY, f"apiKey 不可用：{exc}")
    model = str(config.sideApiModel)

    def call(system: str, user: str) -> str:
        return chat(base, model, api_key, system, user, timeout, max_bytes=MAX_ANSWER_BYTES)

    return call, ("", "")


def _ask(
    paths: DataPaths,
    store: MemoryStore,
    state: ViewsState,
    batch: Batch,
    send: ChatFn,
    now_fn: Callable[[], datetime],
    report: FillReport,
) -> bool:
    """One batch end to end; False when the run should stop (the endpoint failed)."""
    from memself.judge.http import SideApiError

    now = now_fn()
    state.charge(now, 1, batch.charge)
    state.inflight = batch.ids
    save_state(paths, state)  # paid and noted before a byte is sent
    report.requests += 1
    try:
        answer = send(batch.system, batch.user)
    except SideApiError as exc:
        state.inflight = []
        save_state(paths, state)
        log(paths, "views-endpoint-failed", ids=len(batch.ids), error=str(exc))
        report.stopped, report.detail = ENDPOINT_ERROR, str(exc)
        return False
    now = now_fn()
    state.charge(now, 0, estimate_tokens(answer) - ANSWER_RESERVE_PER_MEMORY * len(batch.items))
    kept = read_answer(answer, batch)
    fills = {
        w.memory.id: (w.memory.text, w.memory.appliesWhen, kept[w.memory.id])
        for w in batch.items
        if w.memory.id in kept
    }
    written = set(store.fill_applies_when(fills, now)) if fills else set()
    for w in batch.items:
        mem_id = w.memory.id
        if mem_id in written:
            state.failed.pop(mem_id, None)
            state.seen[mem_id] = [fingerprint(w.memory.text), requests_fingerprint(fills[mem_id][2])]
            report.filled.append(mem_id)
        elif mem_id not in kept:
            state.note_failure(mem_id, now)
            report.failed.append(mem_id)
    state.inflight = []
    save_state(paths, state)
    if len(written) < len(batch.items):
        log(paths, "views-batch-partial", asked=len(batch.items), written=len(written), kept=len(kept))
    return True


def dump_body(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False, indent=2)
