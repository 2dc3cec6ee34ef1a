"""One hook run: stdin JSON -> host adapter -> core -> host adapter -> one JSON object on stdout.

Both entries call ``main``: the fast one hosts execute (``hooks/entry.py`` under ``python -I -S``)
and ``memself hook --agent HOST``. Standard library only; ``main`` never raises and the process
always exits 0, because a hook failure must never block or break the user's turn (Claude Code
reads exit 2 as "block this prompt").
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.paths import DataPaths

Handler = Callable[[HookEvent, datetime, DataPaths], HookReply]

MAX_STDIN_BYTES = 1 << 20  # a larger payload is read to the end and dropped, not parsed
STDIN_TIMEOUT_S = 3.0  # hosts close stdin at once; never wait on one that does not
# Share of the host's timeout after which the watchdog answers "nothing" and exits, so a stuck
# core costs the user this long at most instead of the host's full timeout.
WATCHDOG_SHARE = 0.8
FIXED_NOW_ENV = "MEMSELF_NOW"  # ISO time with offset; reproducible golden files and benchmarks


def main(
    argv: Sequence[str],
    *,
    handler: Handler | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    now: datetime | None = None,
) -> int:
    """Run one hook. Returns 0, always; writes at most one JSON object to ``stdout``."""
    started = time.monotonic()
    env = os.environ if env is None else env
    out = _Output(stdout if stdout is not None else _stdout_buffer())
    run = _Run(host=_agent_arg(argv))
    paths: DataPaths | None = None
    watchdog: threading.Timer | None = None
    try:
        paths = DataPaths.default()
        from memself.hosts import HOSTS

        adapter = HOSTS.get(run.host)
        if adapter is None:
            run.note = "unknown-agent"
            return 0
        run.adapter = adapter
        raw, run.truncated, timed_out = read_bounded(stdin, MAX_STDIN_BYTES, STDIN_TIMEOUT_S)
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
        budget = adapter.TIMEOUTS.get(event.kind, 10) * WATCHDOG_SHARE
        watchdog = _start_watchdog(budget, out, adapter.render(event, HookReply()), paths, run)
        reply = (handler or _engine_first(run))(event, now or _now(env), paths)
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
            if self.done:
                return False
            self.done = True
            if answer is None:
                return True
            data = json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n"
            # Lone surrogates (from \ud800 escapes in the payload) cannot be UTF-8: replace them.
            self._stream.write(data.encode("utf-8", errors="replace"))
            self._stream.flush()
            self.written = answer
            return True


def read_bounded(
    stream: BinaryIO | None, limit: int, timeout_s: float
) -> tuple[bytes, bool, bool]:
    """Read at most ``limit`` bytes; drain and drop the rest (the host must not block on a full
    pipe). Returns ``(data, truncated, timed_out)``."""
    if stream is None:
        stream = _stdin_buffer()
        if stream is None:
            return b"", False, False
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        data = stream.read(limit + 1) or b""
        truncated = len(data) > limit
        while truncated and stream.read(1 << 16):
            pass
        return data[:limit], truncated, False
    if os.isatty(fd):
        return b"", False, False  # started by hand: do not wait for someone to type
    chunks: list[bytes] = []
    size = 0
    truncated = False
    deadline = time.monotonic() + timeout_s
    while True:
        if not _wait_readable(fd, deadline):
            return b"".join(chunks), truncated, True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), truncated, False
        room = limit - size
        if room > 0:
            chunks.append(chunk[:room])
            size += min(room, len(chunk))
        if len(chunk) > max(room, 0):
            truncated = True


def _wait_readable(fd: int, deadline: float) -> bool:
    if os.name == "nt":  # select() takes sockets only there; rely on the host closing the pipe
        return True
    import select

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    try:
        readable, _, _ = select.select([fd], [], [], remaining)
    except (OSError, ValueError):
        return True
    return bool(readable)


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
    return value, ""


# Seconds the hook gives a warm engine to answer a whole session-start or prompt hook.
ENGINE_HOOK_TIMEOUT_S = 2.0


def _engine_first(run: _Run) -> Handler:
    """Session start and prompt go to the warm engine, which has everything loaded; the hook
    process then imports almost nothing. Without a ready engine, the core runs here (no recall
    this turn, and the engine is started for the next one). Stop always runs here: it may wait
    seconds for judge jobs and must not hold the engine."""

    def handler(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        if event.kind in (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT):
            from memself.engine.client import EngineClient, EngineRequestError
            from memself.engine.protocol import ERR_TIMEOUT

            payload = {"event": {**event._asdict(), "kind": event.kind.value},
                       "now": now.isoformat()}
            try:
                answer = EngineClient(paths).request("hook", payload, ENGINE_HOOK_TIMEOUT_S)
                run.note = run.note or "engine"
                return HookReply(**{k: str(v) for k, v in answer.items() if k in HookReply._fields})
            except EngineRequestError as exc:
                run.note = run.note or f"local:{exc.code}"
                if exc.code == ERR_TIMEOUT:
                    # A hung engine would eat the rest of the budget again: answer without recall.
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


def _now(env: Mapping[str, str]) -> datetime:
    fixed = env.get(FIXED_NOW_ENV, "").strip()
    if fixed:
        try:
            value = datetime.fromisoformat(fixed.replace("Z", "+00:00"))
            if value.tzinfo is not None:
                return value
        except ValueError:
            pass
    return datetime.now().astimezone()


def _agent_arg(argv: Sequence[str]) -> str:
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--agent" and i + 1 < len(args):
            return args[i + 1].strip().lower()
        if arg.startswith("--agent="):
            return arg.split("=", 1)[1].strip().lower()
    return ""


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


def _stdin_buffer() -> BinaryIO | None:
    if sys.stdin is None:
        return None
    return getattr(sys.stdin, "buffer", sys.stdin)  # type: ignore[return-value]


__all__ = ["MAX_STDIN_BYTES", "Handler", "decode_payload", "main", "read_bounded"]
