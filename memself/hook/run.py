"""One hook run: the stdin a host gave -> host adapter -> core -> host adapter -> one JSON object
on stdout, and one log line.

Three callers, one function: the hook process when the engine does not answer for it
(``memself.hook.process``, also behind ``memself hook``), and the engine for the hooks forwarded
to it (``memself.warm.service``). Standard library only. ``run`` never raises: a hook failure
must never block or break the user's turn (a host may read exit 2 as "block this prompt"), so
whatever goes wrong ends in the host's "no answer" and a log line saying why.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from memself.hook import deadline
from memself.hook.inputs import ENGINE_EVENTS, Stdin, stdout_buffer
from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.paths import DataPaths
from memself.timeutil import parse_iso

Handler = Callable[[HookEvent, datetime, DataPaths], HookReply]
# Takes the ids of the memories recalled into an answer once that answer is written, and when.
# (ids recalled into a delivered answer, now, the event): rewards them, notes what the turn saw.
RewardSink = Callable[[tuple[str, ...], datetime, HookEvent], None]

# What the engine answers; everything else (Stop may wait seconds for judge jobs, bad input)
# runs in the hook process.
ENGINE_KINDS = tuple(EventKind(kind) for kind in ENGINE_EVENTS)
# Share of the host's timeout after which the watchdog answers "nothing" and exits, so a stuck
# core costs the user this long at most instead of the host's full timeout. The hook process
# has a hard deadline instead (``deadline``, counted from the process's start); this thread
# serves where none could be armed (no SIGALRM).
WATCHDOG_SHARE = 0.8
FIXED_NOW_ENV = "MEMSELF_NOW"  # ISO time with offset; reproducible golden files and benchmarks
# json.loads joins an escaped pair into one character: any surrogate left is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")


class RunContext(NamedTuple):
    """Where one hook runs and what it already knows. The defaults are the hook process's own."""

    host: str  # ``--agent``, lower-cased
    # The core; None: ``memself.hook.core`` in this process, its recall through the engine.
    core: Handler | None = None
    # What the engine answered when the hook process asked it to run the hook: not asked again,
    # and a session start or prompt is answered without recall.
    engine_error: str | None = None
    paths: DataPaths | None = None  # the data directory; None: ``DataPaths.default()``
    env: Mapping[str, str] | None = None  # the hook process's environment (None: ``os.environ``)
    home: Path | None = None  # the hook process's home (None: ``Path.home()``)
    now: datetime | None = None  # None: ``MEMSELF_NOW`` of ``env``, else the clock
    stdout: BinaryIO | None = None  # where the answer goes (None: this process's stdout)
    spent_s: float = 0.0  # of the host's time, already used: off the watchdog's budget, in the log
    # Inside the engine: session starts and prompts only (``run`` declines the rest), no
    # watchdog (its ``os._exit`` would end the engine), logged with note "engine".
    in_engine: bool = False
    # Who rewards the memories recalled into a written answer. None: this process, right after
    # writing it (the hook process: its stdout is the host). The engine passes one that waits
    # for the hook process to say it wrote the answer to the host.
    rewards_to: RewardSink | None = None


def run(stdin: Stdin, context: RunContext) -> bool:
    """Run one hook: at most one JSON object to ``context.stdout``, one log line. True, always,
    except inside the engine for an event it leaves to the hook process: then False, with
    nothing written and nothing logged."""
    started = time.monotonic() - context.spent_s
    env = os.environ if context.env is None else context.env
    out = _Output(context.stdout if context.stdout is not None else stdout_buffer())
    record = _Record(context.host)
    paths = context.paths
    watchdog: threading.Timer | None = None
    try:
        paths = paths or DataPaths.default()
        from memself.hook.registered import registered_in
        from memself.hosts import FACTS, HOSTS, guess_host

        payload, decode_note = decode_payload(stdin.raw, stdin.truncated)
        guessed = not record.host and not context.in_engine
        if guessed:
            record.host = guess_host(payload)
        adapter = HOSTS.get(record.host)
        if adapter is None:
            if context.in_engine:
                record.declined = True
                return False
            record.note = "unknown-agent"
            return True
        record.adapter = adapter
        event = adapter.parse(payload, env)
        if context.in_engine and (decode_note or event.kind not in ENGINE_KINDS):
            record.declined = True
            return False
        record.note = "stdin-timeout" if stdin.timed_out else decode_note
        if guessed:
            record.note = ",".join(n for n in ("guessed-host", record.note) if n)
        if adapter.steps_aside(payload, env, registered_in(FACTS, context.home or Path.home(), env)):
            record.note = "stepped-aside"
            return True
        record.event = event
        if event.kind is EventKind.UNKNOWN:
            record.note = record.note or "unknown-event"
            out.write(adapter.render(event, HookReply()))
            return True
        if not event.session_key:
            record.note = record.note or "no-session"
        if context.in_engine:
            record.note = record.note or "engine"
        if deadline.armed():
            # The hook process: the adapter's timeout replaces an older install's fallback (the
            # event's own deadline, still counted from the process start).
            deadline.learn(adapter.TIMEOUTS.get(event.kind))
            deadline.on_expire(lambda: _log_expired(paths, record, out, started))
        elif not context.in_engine:
            timeout = deadline.registered_timeout() or adapter.TIMEOUTS.get(event.kind, 10)
            budget = max(timeout * WATCHDOG_SHARE - context.spent_s, 0.1)
            watchdog = _start_watchdog(budget, out, adapter.render(event, HookReply()), paths, record)
        core = context.core or _local_core(record, context.engine_error)
        now = context.now or now_from_env(env)
        reply = core(event, now, paths)
        if out.write(adapter.render(event, reply)) and out.written is not None and reply.rewards:
            # A recall is rewarded only when its text was actually handed over: not when the
            # watchdog or the deadline answered "nothing" first.
            if context.rewards_to is not None:
                context.rewards_to(reply.rewards, now, event)
            else:
                _reward(paths, reply.rewards, now)
                note_shown(paths, event, reply.rewards, now)
    except BaseException as exc:  # a hook must answer whatever went wrong
        record.error = _describe(exc)
        if record.adapter is not None:
            try:
                out.write(record.adapter.render(record.event or _blank_event(record.host), HookReply()))
            except Exception:  # nothing more to try
                pass
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if not record.declined:
            try:
                _log_run(paths, record, out, started)
            except Exception:  # logging must not be what breaks a hook
                pass
    return True


class _Record:
    """What one run learned, for its single log line (never the prompt)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.adapter: Any = None
        self.event: HookEvent | None = None
        self.note = ""
        self.error = ""
        self.declined = False  # left to the hook process: no log line here


class _Output:
    """Writes the answer once; the main thread and the watchdog race for it."""

    def __init__(self, stream: BinaryIO | None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.written: dict[str, Any] | None = None
        self.done = False

    def write(self, answer: dict[str, Any] | None) -> bool:
        with self._lock:
            if self.done or not deadline.begin_answer():
                return False
            self.done = True
            try:
                if answer is None:
                    return True
                if self._stream is None:  # the host gave the process no stdout
                    raise OSError("no stdout to answer on")
                self._stream.write(encode_answer(answer))
                self._stream.flush()
                self.written = answer
                return True
            finally:
                deadline.end_answer()


def encode_answer(answer: dict[str, Any] | None) -> bytes:
    """What the hook prints for ``answer``: one JSON line, nothing for None."""
    if answer is None:
        return b""
    data = json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n"
    # A lone surrogate left anywhere (a hand-edited file) cannot be UTF-8: replace it.
    return data.encode("utf-8", errors="replace")


def decode_payload(raw: bytes, truncated: bool) -> tuple[dict[str, Any], str]:
    """The payload as a dict, ``{}`` for anything else, and a note saying why."""
    if truncated:
        return {}, "too-large"
    text = raw.decode("utf-8-sig", errors="replace")
    if not text.strip():
        return {}, "empty-stdin"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}, "bad-json"
    if not isinstance(value, dict):
        return {}, "not-object"
    return no_lone_surrogates(value), ""


def no_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate (a ``\\ud83d`` escape with no partner: half an emoji
    cut by a client) replaced by U+FFFD. Nothing downstream can encode one: not the engine
    request, not the tokenizer, not a job file."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        return {no_lone_surrogates(k): no_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [no_lone_surrogates(v) for v in value]
    return value


def now_from_env(env: Mapping[str, str]) -> datetime:
    """``MEMSELF_NOW`` of ``env`` when it holds an ISO time with offset, else the clock."""
    fixed = parse_iso(env.get(FIXED_NOW_ENV, "").strip(), require_zone=True)
    return fixed or datetime.now().astimezone()


def _local_core(record: _Record, engine_error: str | None) -> Handler:
    """The core in this process. Session start and prompt come here when the engine could not run
    them: with its error (``engine_error``: unreachable, loading past the deadline, of another
    version...) they are answered without recall, since the hook process already waited for the
    engine as long as the deadline allows; when the engine was not asked (Stop aside: stdin
    unreadable as a whole: left open, too large) the core asks it for recall."""

    def core(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        from memself.hook.core import handle

        if engine_error is not None and event.kind in ENGINE_KINDS:
            record.note = record.note or f"local:{engine_error}"
            return handle(event, now, paths, recall=lambda text, when, workspace: None)
        return handle(event, now, paths)

    return core


def note_shown(paths: DataPaths, event: HookEvent, ids: tuple[str, ...], now: datetime) -> None:
    """What the prompt was shown, for the Stop-side check (``memself.kept``); after the answer
    reached the host, so the host never waits for it. A failure is logged, never raised."""
    from memself.kept.turns import note_shown as write

    try:
        write(paths, event.host, event.session_key, event.turn_id, ids, now)
    except OSError as exc:
        from memself.logs import log

        log(paths, "kept-note-failed", error=str(exc))


def _reward(paths: DataPaths, ids: tuple[str, ...], now: datetime) -> None:
    from memself.store.memory_store import MemoryStore

    MemoryStore(paths).reward_recall(ids, now)  # a busy lock or a failed write is logged there


def _start_watchdog(
    budget_s: float, out: _Output, empty: dict[str, Any] | None, paths: DataPaths, record: _Record
) -> threading.Timer:
    def fire() -> None:
        if out.write(empty):
            record.note = "watchdog"
            _log_run(paths, record, out, None)
            try:
                sys.stderr.flush()
            finally:
                os._exit(0)

    timer = threading.Timer(budget_s, fire)
    timer.daemon = True
    timer.start()
    return timer


def _log_expired(paths: DataPaths, record: _Record, out: _Output, started: float) -> None:
    """The log line of a run the deadline ended (``deadline`` answered "nothing")."""
    record.note = "deadline"
    _log_run(paths, record, out, started)


def _describe(exc: BaseException) -> str:
    """Exception type and where it was raised; not its message, which may quote the prompt."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}"


def _blank_event(host: str) -> HookEvent:
    return HookEvent(host, EventKind.UNKNOWN, "", "", "", "", "", False)


def _log_run(paths: DataPaths | None, record: _Record, out: _Output, started: float | None) -> None:
    event = record.event
    fields: dict[str, object] = {
        "host": record.host[:32],
        "hook_event": event.event_name if event else "",
        "kind": event.kind.value if event else "",
        "session": event.session_key[:12] if event else "",
        "out": sorted(out.written) if out.written else [],
    }
    if started is not None:
        fields["ms"] = round((time.monotonic() - started) * 1000, 1)
    if record.note:
        fields["note"] = record.note
    if record.error:
        fields["error"] = record.error
    try:
        from memself.logs import log
    except Exception:  # no logs module: stderr reaches the host's debug log
        sys.stderr.write(f"memself hook-run {json.dumps(fields, ensure_ascii=False)}\n")
        return
    log(paths, "hook-run", **fields)
