"""One hook run: stdin JSON -> host adapter -> core -> host adapter -> one JSON object on stdout.

Both entries call ``main``: the fast one hosts execute (``hooks/entry.py`` under ``python -I -S``)
and ``memself hook --agent HOST``. Standard library only; ``main`` never raises and the process
always exits 0, because a hook failure must never block or break the user's turn (Claude Code
reads exit 2 as "block this prompt").
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from memself import hookdeadline
from memself.engine.fasthook import (
    ENGINE_HOOK_TIMEOUT_S,
    MAX_STDIN_BYTES,
    MIN_ENGINE_WAIT_S,
    STDIN_TIMEOUT_S,
    _stdin_buffer,
    agent_arg,
    read_bounded,
)
from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.paths import DataPaths
from memself.timeutil import parse_iso

Handler = Callable[[HookEvent, datetime, DataPaths], HookReply]

# Share of the host's timeout after which the watchdog answers "nothing" and exits, so a stuck
# core costs the user this long at most instead of the host's full timeout. The hook process
# has a hard deadline instead (``hookdeadline``, counted from the process's start); this thread
# serves where none could be armed (no SIGALRM, or ``main`` called by another program).
WATCHDOG_SHARE = 0.8
FIXED_NOW_ENV = "MEMSELF_NOW"
# json.loads joins an escaped pair into one character: any surrogate left is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")  # ISO time with offset; reproducible golden files and benchmarks


def main(
    argv: Sequence[str],
    *,
    handler: Handler | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    now: datetime | None = None,
    paths: DataPaths | None = None,
    prefetched: tuple[bytes, bool, bool] | None = None,
    engine_error: str | None = None,
    spent_s: float = 0.0,
    handler_note: str = "",
    watchdog_on: bool = True,
) -> int:
    """Run one hook. Returns 0, always; writes at most one JSON object to ``stdout``.

    From the fast path (``memself.engine.fasthook``): ``prefetched`` is what it read from stdin
    (``read_bounded``'s triple), ``engine_error`` what the engine answered instead of the hook
    (not asked again), ``spent_s`` the time already used (off the watchdog's budget, in the log).
    Inside the engine (``run_forwarded``): ``paths`` is the engine's, ``handler_note`` the log
    note of a handled run, and no watchdog (its ``os._exit`` would end the engine).
    """
    started = time.monotonic() - spent_s
    env = os.environ if env is None else env
    out = _Output(stdout if stdout is not None else _stdout_buffer())
    run = _Run(host=agent_arg(argv))
    watchdog: threading.Timer | None = None
    try:
        paths = paths or DataPaths.default()
        from memself.hosts import HOSTS

        adapter = HOSTS.get(run.host)
        if adapter is None:
            run.note = "unknown-agent"
            return 0
        run.adapter = adapter
        if prefetched is None:
            prefetched = read_bounded(
                stdin if stdin is not None else _stdin_buffer(), MAX_STDIN_BYTES, STDIN_TIMEOUT_S
            )
        raw, run.truncated, timed_out = prefetched
        payload, decode_note = decode_payload(raw, run.truncated)
        run.note = "stdin-timeout" if timed_out else decode_note
        if adapter.steps_aside(payload, env, home or Path.home()):
            run.note = "stepped-aside"
            return 0
        event = adapter.parse(payload, env)
        run.event = event
        if event.kind is EventKind.UNKNOWN:
            run.note = run.note or "unknown-event"
            out.write(adapter.render(event, HookReply()))
            return 0
        if not event.session_key:
            run.note = run.note or "no-session"
        if hookdeadline.armed():
            # The hook process: the event's own deadline, still counted from the process start.
            hookdeadline.arm(run.host, event.kind.value)
            hookdeadline.on_expire(lambda: _log_expired(paths, run, out, started))
        elif watchdog_on:
            budget = max(adapter.TIMEOUTS.get(event.kind, 10) * WATCHDOG_SHARE - spent_s, 0.1)
            watchdog = _start_watchdog(budget, out, adapter.render(event, HookReply()), paths, run)
        reply = (handler or _engine_first(run, engine_error))(event, now or _now(env), paths)
        run.note = run.note or handler_note
        out.write(adapter.render(event, reply))
    except BaseException as exc:  # a hook must answer whatever went wrong
        run.error = _describe(exc)
        if run.adapter is not None:
            try:
                out.write(run.adapter.render(run.event or _blank_event(run.host), HookReply()))
            except Exception:  # nothing more to try
                pass
    finally:
        if watchdog is not None:
            watchdog.cancel()
        try:
            _log_run(paths, run, out, started)
        except Exception:  # logging must not be what breaks a hook
            pass
    return 0


class _Run:
    """What one run learned, for its single log line (never the prompt)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.adapter: Any = None
        self.event: HookEvent | None = None
        self.truncated = False
        self.note = ""
        self.error = ""


class _Output:
    """Writes the answer once; the main thread and the watchdog race for it."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.written: dict[str, Any] | None = None
        self.done = False

    def write(self, answer: dict[str, Any] | None) -> bool:
        with self._lock:
            if self.done or not hookdeadline.begin_answer():
                return False
            self.done = True
            try:
                if answer is None:
                    return True
                data = json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n"
                # A lone surrogate left anywhere (a hand-edited file) cannot be UTF-8: replace it.
                self._stream.write(data.encode("utf-8", errors="replace"))
                self._stream.flush()
                self.written = answer
                return True
            finally:
                hookdeadline.end_answer()


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
    return _no_lone_surrogates(value), ""


def _no_lone_surrogates(value: Any) -> Any:
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
        return {_no_lone_surrogates(k): _no_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_lone_surrogates(v) for v in value]
    return value


ENGINE_KINDS = (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT)


def _engine_first(run: _Run, engine_error: str | None = None) -> Handler:
    """Session start and prompt go to the warm engine, which has everything loaded; the hook
    process then imports almost nothing. Without a ready engine, the core runs here (no recall
    this turn, and the engine is started for the next one). Stop always runs here: it may wait
    seconds for judge jobs and must not hold the engine. ``engine_error``: the fast path already
    asked the engine and got this error code; it is not asked again."""

    def handler(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        if event.kind in ENGINE_KINDS:
            from memself.engine.client import EngineClient, EngineRequestError
            from memself.engine.protocol import ERR_TIMEOUT

            payload = {"event": {**event._asdict(), "kind": event.kind.value}, "now": now.isoformat()}
            wait = hookdeadline.budget(ENGINE_HOOK_TIMEOUT_S, hookdeadline.LOCAL_RESERVE_S)
            try:
                if engine_error is not None:
                    raise EngineRequestError(engine_error)
                if wait <= MIN_ENGINE_WAIT_S:  # no time left for the engine: answer here
                    raise EngineRequestError(ERR_TIMEOUT)
                answer = EngineClient(paths).request("hook", payload, wait)
                run.note = run.note or "engine"
                return HookReply(**{k: str(v) for k, v in answer.items() if k in HookReply._fields})
            except EngineRequestError as exc:
                run.note = run.note or f"local:{exc.code}"
                if exc.code == ERR_TIMEOUT or engine_error is not None:
                    # A hung engine would eat the rest of the budget again, and the fast path
                    # already waited for a starting one as long as the deadline allows: answer
                    # without recall.
                    return _core_handler(run)(event, now, paths, recall=lambda text, when: None)
        return _core_handler(run)(event, now, paths)

    return handler


def _core_handler(run: _Run) -> Callable[..., HookReply]:
    from memself.hookcore import handle

    return handle


def _start_watchdog(
    budget_s: float, out: _Output, empty: dict[str, Any] | None, paths: DataPaths, run: _Run
) -> threading.Timer:
    def fire() -> None:
        if out.write(empty):
            run.note = "watchdog"
            _log_run(paths, run, out, None)
            try:
                sys.stderr.flush()
            finally:
                os._exit(0)

    timer = threading.Timer(budget_s, fire)
    timer.daemon = True
    timer.start()
    return timer


def _log_expired(paths: DataPaths, run: _Run, out: _Output, started: float) -> None:
    """The log line of a run the deadline ended (``hookdeadline`` answered "nothing")."""
    run.note = "deadline"
    _log_run(paths, run, out, started)


def _now(env: Mapping[str, str]) -> datetime:
    fixed = parse_iso(env.get(FIXED_NOW_ENV, "").strip(), require_zone=True)
    return fixed or datetime.now().astimezone()


def _describe(exc: BaseException) -> str:
    """Exception type and where it was raised; not its message, which may quote the prompt."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}"


def _blank_event(host: str) -> HookEvent:
    return HookEvent(host, EventKind.UNKNOWN, "", "", "", "", "", False)


def _log_run(paths: DataPaths | None, run: _Run, out: _Output, started: float | None) -> None:
    event = run.event
    fields: dict[str, object] = {
        "host": run.host[:32],
        "hook_event": event.event_name if event else "",
        "kind": event.kind.value if event else "",
        "session": event.session_key[:12] if event else "",
        "out": sorted(out.written) if out.written else [],
    }
    if started is not None:
        fields["ms"] = round((time.monotonic() - started) * 1000, 1)
    if run.note:
        fields["note"] = run.note
    if run.error:
        fields["error"] = run.error
    try:
        from memself.logs import log
    except Exception:  # no logs module: stderr reaches the host's debug log
        sys.stderr.write(f"memself hook-run {json.dumps(fields, ensure_ascii=False)}\n")
        return
    log(paths, "hook-run", **fields)


def _stdout_buffer() -> BinaryIO:
    return getattr(sys.stdout, "buffer", sys.stdout)  # type: ignore[return-value]


def run_forwarded(payload: Mapping[str, Any], paths: DataPaths, core: Handler) -> dict[str, Any]:
    """The engine's half of the fast path (``memself.engine.fasthook``): the whole hook for the
    stdin a hook process forwarded, with that process's environment subset, home and clock.

    ``{"stdout": <base64 of what the hook prints>}``, or ``{"local": True}`` for what must run in
    the hook process: anything but a well-formed session start or prompt (Stop may wait seconds
    for judge jobs; bad input is logged there as before). ``core`` is the engine's in-process
    ``hookcore.handle``.
    """
    import binascii
    import io

    from memself.hosts import HOSTS

    host = str(payload.get("host", ""))
    raw = binascii.a2b_base64(str(payload.get("stdin", "")))
    env = _no_lone_surrogates({str(k): str(v) for k, v in dict(payload.get("env") or {}).items()})
    adapter = HOSTS.get(host)
    parsed, note = decode_payload(raw, False)
    if adapter is None or note or adapter.parse(parsed, env).kind not in ENGINE_KINDS:
        return {"local": True}
    started_wall = float(payload.get("started", time.time()))
    out = io.BytesIO()
    main(
        ["--agent", host],
        handler=core,
        stdout=out,
        env=env,
        home=Path(str(payload.get("home") or Path.home())),
        now=_forwarded_now(env, payload),
        paths=paths,
        prefetched=(raw, False, False),
        spent_s=max(0.0, time.time() - started_wall),
        handler_note="engine",
        watchdog_on=False,
    )
    return {"stdout": binascii.b2a_base64(out.getvalue(), newline=False).decode("ascii")}


def _forwarded_now(env: Mapping[str, str], payload: Mapping[str, Any]) -> datetime:
    """What ``_now`` gives in the hook process: its fixed clock, else this instant in the hook
    process's time zone (the engine may have been started with another TZ)."""
    if env.get(FIXED_NOW_ENV, "").strip():
        return _now(env)
    from datetime import timedelta, timezone

    name = str(payload.get("zone") or "")
    try:
        offset = timedelta(seconds=int(payload.get("utcoffset", 0)))
        zone = timezone(offset, name) if name else timezone(offset)
    except (TypeError, ValueError):
        return datetime.now().astimezone()
    return datetime.now(zone)


__all__ = ["MAX_STDIN_BYTES", "Handler", "decode_payload", "main", "read_bounded", "run_forwarded"]
