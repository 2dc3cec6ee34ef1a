"""The hook process: read the event, hand it to the warm engine, print the engine's answer; when the
engine cannot answer, run the hook here (``memself.hook.run``).

``memself/hooks/entry.py`` (what hosts execute, under ``python -I -S``) and ``memself hook`` both call
``main``. With a ready engine the whole hook (parse, step-aside check, core, render, log line)
runs inside the engine, which has everything loaded; this process reads stdin, sends it as one
``hook-forward`` request and writes what comes back. Why: under ``-I -S`` the interpreter starts
fast, but ``json``, ``re``, ``enum``, ``typing`` or ``pathlib`` each cost about as much again, and
the host adapters, the core and ``run`` need all of them (``bench/bench_hooks.py`` measures it).
So this module imports only ``memself.hook.inputs`` and the engine's client-side leaves
(``protocol``, ``location``, ``transport``): the request is framed by hand and the reply's one
field is cut out of a fixed shape, with ``json`` imported only for replies of any other shape
(errors, "run it locally").

Anything else (no engine, an engine not ready or of another version, a Stop event, bad input)
runs ``memself.hook.run`` in this process, told what the engine already said so that it does not
ask again.
"""

import os
import time

from memself.datadir import data_root_text as data_root
from memself.engine import transport
from memself.engine.location import code_fingerprint, locate
from memself.engine.protocol import (
    ACK,
    ERR_NOT_READY,
    ERR_PROTOCOL,
    ERR_TIMEOUT,
    ERR_UNREACHABLE,
    ERR_VERSION_MISMATCH,
    FORWARD_REPLY_PREFIX,
    FORWARD_REPLY_SUFFIX,
    MAX_REQUEST_BYTES,
    FrameError,
    forward_request,
    json_text,
    with_token,
)
from memself.hook import deadline
from memself.hook.inputs import ENGINE_EVENTS, Stdin, agent_arg, event_arg, read_stdin, stdout_buffer

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket

# Seconds the hook gives a warm engine to answer a whole session-start or prompt hook, at most
# (less when the hook's deadline is near); below the minimum the engine is not asked at all.
ENGINE_HOOK_TIMEOUT_S = 2.0
MIN_ENGINE_WAIT_S = 0.05
# A prompt that meets no engine, or a loading one, waits for it until this long after the hook
# process started (the deadline may cut it shorter), polling for its socket meanwhile.
COLD_WAIT_S = 4.0
COLD_POLL_S = 0.05
# A loading engine answers "not ready" this long before the client gives up waiting for it.
_REPLY_MARGIN_S = 0.1
# The environment the host adapters and ``run`` read travels to the engine, never the rest
# (keys): by rule, so that no host is named here. Hosts name their project directory and their
# version in ``<HOST>_PROJECT_DIR`` and ``<HOST>_VERSION``; ``PWD`` is where the host started the
# hook (the project, when a payload names none); ``run`` reads a fixed clock.
# tests/test_hook_fastpath.py checks that the adapters read nothing else.
FORWARDED_ENV_SUFFIXES = ("_PROJECT_DIR", "_VERSION")
FORWARDED_ENV = ("MEMSELF_NOW", "PWD")
# Errors after which a prompt starts an engine (none there, or one of other code) or waits for
# the one that is loading.
_COLD = (ERR_UNREACHABLE, ERR_NOT_READY, ERR_VERSION_MISMATCH)

# What the engine made of a forwarded hook: ("out", stdout bytes), ("local", "") for an event
# that must run here, ("error", ERR_* code) when it could not answer; ("", "") when not asked.
Outcome = tuple[str, "bytes | str"]
# The connection an "out" answer came on, kept open until this process has written that answer
# to the host: then it says so (``ACK``), and only then does the engine reward the memories
# recalled into it.
_answered_on: "list[_socket.socket]" = []


def main(argv: list[str]) -> None:
    """The hook: answer through the engine, else run it here. Writes at most one answer; raises
    nothing the entry would not catch anyway."""
    started = time.time()
    host = agent_arg(argv)
    stdin = read_stdin()
    event = event_arg(argv) or payload_kind(stdin)
    kind, said = _ask_engine(host, event, stdin, started) if host else ("", "")
    if kind == "out":
        delivered = False
        try:
            if isinstance(said, bytes) and said and deadline.begin_answer():
                try:
                    stdout = stdout_buffer()
                    if stdout is not None:  # without a stdout there is nobody to answer
                        stdout.write(said)
                        stdout.flush()
                        delivered = True
                finally:
                    deadline.end_answer()
        finally:
            _close_answered(delivered)
        return
    from memself.hook.run import RunContext, run

    error = said if kind == "error" and isinstance(said, str) else None
    run(stdin, RunContext(host, engine_error=error, spent_s=max(0.0, time.time() - started)))


def _ask_engine(host: str, event: str, stdin: Stdin, started: float) -> Outcome:
    """The engine's outcome for a session start or prompt (``event``, a kind); ("", "") when it
    was not asked (Stop, unreadable stdin, a request too large) and the local run may ask it for
    recall."""
    if stdin.truncated or stdin.timed_out or event not in ENGINE_EVENTS:
        return ("", "")
    # The engine gets what the deadline leaves after a local run's share: when it does not
    # answer in time, this process still answers (without recall) before the deadline.
    prompt = event == "prompt_submit"
    wait = deadline.budget(ENGINE_HOOK_TIMEOUT_S, deadline.LOCAL_RESERVE_S)
    if wait <= MIN_ENGINE_WAIT_S:
        return ("error", ERR_TIMEOUT)  # no time left for the engine: answer here, without it
    try:
        outcome = forward(host, stdin.raw, started, wait, wait_ready=prompt)
        if prompt and outcome is not None and outcome[0] == "error" and outcome[1] in _COLD:
            outcome = _start_and_forward(host, stdin.raw, started, outcome)
    except Exception:  # a bug here must cost one local run, not the answer
        return ("", "")
    return outcome or ("", "")


def _start_and_forward(host: str, raw: bytes, started: float, outcome: Outcome | None) -> Outcome | None:
    """The first prompt of a working session usually meets no engine (it exits when idle) or a
    starting one: start it if nobody has, then wait for it to be ready within the hook's
    deadline (less a local run's share), so that this prompt gets its recall too.

    The wait ends at ``COLD_WAIT_S`` after this process started, or earlier when the deadline
    says so."""

    def left() -> float:
        age = deadline.process_age()
        return deadline.budget(max(0.0, COLD_WAIT_S - age), deadline.LOCAL_RESERVE_S)

    if outcome is not None and outcome[1] in (ERR_UNREACHABLE, ERR_VERSION_MISMATCH):
        from memself.engine.client import spawn_engine
        from memself.paths import DataPaths

        # A no-op when another hook already started one; an engine of other code is exiting,
        # and its successor waits for its lock.
        spawn_engine(DataPaths(data_root()), replace=outcome[1] == ERR_VERSION_MISMATCH)
    while left() > MIN_ENGINE_WAIT_S:
        outcome = forward(host, raw, started, left(), wait_ready=True)
        if outcome is None or outcome[0] != "error" or outcome[1] != ERR_UNREACHABLE:
            return outcome
        time.sleep(COLD_POLL_S)  # the engine is still importing: its socket is not there yet
    return outcome


def payload_kind(stdin: Stdin) -> str:
    """The kind of the event on stdin, for a command that does not name it (``--event``: an
    older install's, ``memself hook``): parsed as the local run would, at the cost of ``json``
    and ``memself.hosts``. "" when it names no event we handle. Only where to run it depends on
    this: a Stop is never sent to the engine, which may be busy (a Stop must not wait on it)."""
    if stdin.truncated:
        return ""
    try:
        import json

        from memself.hosts.base import event_kind

        payload = json.loads(stdin.raw.decode("utf-8-sig", errors="replace"))
        if not isinstance(payload, dict):
            return ""
        kind = event_kind(payload.get("hook_event_name"))
    except (ValueError, RecursionError, ImportError):
        return ""
    return "" if kind.value == "unknown" else kind.value


def forward(
    host: str,
    raw: bytes,
    started: float,
    timeout_s: float = ENGINE_HOOK_TIMEOUT_S,
    *,
    wait_ready: bool = False,
) -> Outcome | None:
    """Ask the engine to run the hook for ``raw``: its outcome, or None when the request would
    be too large to send."""
    body = request_body(host, raw, started, timeout_s if wait_ready else 0.0)
    if len(body) > MAX_REQUEST_BYTES:
        return None
    deadline = time.monotonic() + timeout_s
    try:
        sock, token = transport.connect(locate(data_root()), deadline)
        outcome: Outcome = ("", "")
        try:
            if token is not None:  # the TCP fallback: the token is the last field
                body = with_token(body, token)
            outcome = parse_reply(transport.exchange(sock, body, deadline))
        finally:
            if outcome[0] == "out":
                _close_answered(False)  # an earlier answer's connection, if any: not this one's
                _answered_on.append(sock)
            else:
                sock.close()
    except FrameError as exc:
        return ("error", exc.code)
    return outcome


def _close_answered(delivered: bool) -> None:
    """Tell the engine whether the host got its answer (``ACK``, or just closing), then close."""
    while _answered_on:
        sock = _answered_on.pop()
        try:
            if delivered:
                sock.sendall(ACK)
        except OSError:
            pass  # the engine is gone: its reward goes with it
        finally:
            sock.close()


def request_body(host: str, raw: bytes, started: float, wait_ready_s: float = 0.0) -> bytes:
    """The request frame's body (``protocol.forward_request``).
    ``wait_ready_s``: how long a loading engine may wait for its warm-up before answering (a
    little less than the caller waits for the reply, so "not ready" still arrives in time)."""
    import memself

    local = time.localtime(started)
    env = ",".join(
        f"{json_text(key)}:{json_text(value)}" for key, value in os.environ.items() if forwarded(key)
    )
    payload = (
        f'{{"host":{json_text(host)},'
        f'"stdinHex":"{raw.hex()}",'
        f'"env":{{{env}}},"home":{json_text(os.path.expanduser("~"))},'
        f'"started":{started!r},"utcoffset":{int(local.tm_gmtoff or 0)},'
        f'"zone":{json_text(local.tm_zone or "")}}}'
    )
    wait_s = round(max(0.0, wait_ready_s - _REPLY_MARGIN_S), 3) if wait_ready_s else 0.0
    return forward_request(payload, wait_s, memself.__version__, code_fingerprint())


def forwarded(key: str) -> bool:
    """Whether the hook's environment variable ``key`` travels to the engine."""
    return key in FORWARDED_ENV or key.endswith(FORWARDED_ENV_SUFFIXES)


def parse_reply(reply: bytes) -> Outcome:
    """The outcome a reply body says, read from its fixed shape without ``json`` when it can."""
    if reply.startswith(FORWARD_REPLY_PREFIX) and reply.endswith(FORWARD_REPLY_SUFFIX):
        try:
            return (
                "out",
                bytes.fromhex(reply[len(FORWARD_REPLY_PREFIX) : -len(FORWARD_REPLY_SUFFIX)].decode("ascii")),
            )
        except ValueError:  # UnicodeDecodeError included
            return ("error", ERR_PROTOCOL)
    from memself.engine.protocol import decode  # any other shape: an error, or "run it locally"

    try:
        message = decode(reply)
    except FrameError:
        return ("error", ERR_PROTOCOL)
    result = message.get("result")
    if message.get("ok") is True and isinstance(result, dict):
        stdout = result.get("stdoutHex")
        if isinstance(stdout, str):  # same answer, other spelling (a future server's json)
            try:
                return ("out", bytes.fromhex(stdout))
            except ValueError:
                return ("error", ERR_PROTOCOL)
        if result.get("local") is True:
            return ("local", "")
        return ("error", ERR_PROTOCOL)
    code = message.get("error")
    return ("error", code if isinstance(code, str) and code else ERR_PROTOCOL)
