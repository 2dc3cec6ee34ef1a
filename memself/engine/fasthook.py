"""The hook's fast path: hand the raw event to the warm engine and print the engine's answer.

With a ready engine, the whole hook (parse, step-aside check, core, render, log line) runs inside
the engine (``memself.hookrun.run_forwarded``); this process reads stdin, sends it over the
private socket and writes what comes back. Why: measured on these machines (2 busy cores),
``python -I -S -c pass`` starts in ~19 ms, and ``import json`` adds ~20 ms (``re``, ``enum``,
``functools``...), ``typing`` or ``pathlib`` ~25 ms each; the host adapters, the core and the
full hook need all of them. So this module imports only ``_socket``, ``select``, ``binascii``
and memself modules that import nothing else: the request is framed by hand (protocol.py's frame:
4-byte length + JSON object) and the reply's one field is cut out of a fixed shape, with ``json``
imported only for replies of any other shape (errors, "run it locally").

Anything else (no engine, an engine not ready or of another version, a Stop event, bad input, a
platform without Unix sockets) ends in ``memself.hookrun.main``, which runs the hook in this
process exactly as before, told what the engine already said so it does not ask twice.
"""

from __future__ import annotations

import os
import sys
import time

from memself import hookdeadline

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs the hook ~25 ms
    from typing import BinaryIO

OP_HOOK_FORWARD = "hook-forward"
MAX_STDIN_BYTES = 1 << 20  # a larger payload is read to the end and dropped, not parsed
STDIN_TIMEOUT_S = 3.0  # hosts close stdin at once; never wait on one that does not
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
# The environment the host adapters and hookrun read (project directory fallbacks for the cwd,
# Cursor detection, a fixed clock); only these travel to the engine, never the rest (keys).
# tests/test_hook_fastpath.py checks that the adapters read nothing else.
FORWARDED_ENV = (
    "CLAUDE_PROJECT_DIR",
    "CURSOR_PROJECT_DIR",
    "CODEBUDDY_PROJECT_DIR",
    "WORKBUDDY_PROJECT_DIR",
    "CURSOR_VERSION",
    "MEMSELF_NOW",
)
# Lower-cased host event names of session start and prompt (hosts.base._KIND_BY_NAME; a test
# keeps them in sync).
ENGINE_EVENT_NAMES = (b"sessionstart", b"userpromptsubmit", b"beforesubmitprompt")
_REPLY_PREFIX = b'{"ok":true,"result":{"stdout":"'
_REPLY_SUFFIX = b'"}}'
# JSON string escapes for what str.translate must rewrite; lone surrogates (undecodable bytes in
# the environment) are escaped by the encoder's backslashreplace as \udcXX, also valid JSON.
_JSON_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_JSON_ESCAPES[ord('"')] = '\\"'
_JSON_ESCAPES[ord("\\")] = "\\\\"


def run(argv: list[str]) -> None:
    """The hook: answer through the engine, else run ``memself.hookrun.main`` here. Never raises
    past what ``main`` would (the entry catches everything anyway)."""
    started = time.time()
    host = agent_arg(argv)
    raw, truncated, timed_out = read_bounded(_stdin_buffer(), MAX_STDIN_BYTES, STDIN_TIMEOUT_S)
    hookdeadline.arm_for_payload(host, raw)
    outcome: tuple[str, bytes | str] | None = None
    if host and not truncated and not timed_out and may_be_engine_event(raw):
        # The engine gets what the deadline leaves after a local run's share: when it does not
        # answer in time, this process still answers (without recall) before the deadline.
        prompt = hookdeadline.payload_kind(raw) == "prompt_submit"
        wait = hookdeadline.budget(ENGINE_HOOK_TIMEOUT_S, hookdeadline.LOCAL_RESERVE_S)
        try:
            if wait > MIN_ENGINE_WAIT_S:
                outcome = forward(host, raw, started, wait, wait_ready=prompt)
            if prompt and _cold(outcome):
                outcome = _start_and_forward(host, raw, started, outcome)
        except Exception:  # a bug here must cost one local run, not the answer
            outcome = None
    if outcome is not None and outcome[0] == "out":
        answer = outcome[1]
        if answer and hookdeadline.begin_answer():
            stdout = getattr(sys.stdout, "buffer", sys.stdout)
            stdout.write(answer)
            stdout.flush()
            hookdeadline.end_answer()
        return
    from memself.hookrun import main

    error = outcome[1] if outcome is not None and outcome[0] == "error" else None
    main(
        argv,
        prefetched=(raw, truncated, timed_out),
        engine_error=error,
        spent_s=max(0.0, time.time() - started),
    )


def _cold(outcome: tuple[str, bytes | str] | None) -> bool:
    """No engine answered the prompt, or one is still loading: worth starting and waiting."""
    from memself.engine.protocol import ERR_NOT_READY, ERR_UNREACHABLE, ERR_VERSION_MISMATCH

    return (
        outcome is not None
        and outcome[0] == "error"
        and outcome[1] in (ERR_UNREACHABLE, ERR_NOT_READY, ERR_VERSION_MISMATCH)
    )


def _start_and_forward(
    host: str, raw: bytes, started: float, outcome: tuple[str, bytes | str] | None
) -> tuple[str, bytes | str] | None:
    """The first prompt of a working session usually meets no engine (it exits when idle) or a
    starting one: start it if nobody has, then wait for it to be ready within the hook's
    deadline (less a local run's share), so that this prompt gets its recall too.

    The engine is ready about a second after it starts; the wait ends at ``COLD_WAIT_S`` after
    this process started, or earlier when the deadline says so."""
    from memself.engine.protocol import ERR_UNREACHABLE, ERR_VERSION_MISMATCH

    def left() -> float:
        age = hookdeadline.process_age()
        return hookdeadline.budget(max(0.0, COLD_WAIT_S - age), hookdeadline.LOCAL_RESERVE_S)

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


def may_be_engine_event(raw: bytes) -> bool:
    """False when ``raw`` cannot be a session start or prompt (Stop, most bad input): those run
    here without a detour through the engine, which may be busy (a Stop must not wait on it).
    A cheap byte search, not a parse: a name spelled with JSON escapes is missed and just runs
    locally; a Stop quoting the names is asked about and answered "local"."""
    lowered = raw.lower()
    return any(name in lowered for name in ENGINE_EVENT_NAMES)


def forward(
    host: str,
    raw: bytes,
    started: float,
    timeout_s: float = ENGINE_HOOK_TIMEOUT_S,
    *,
    wait_ready: bool = False,
) -> tuple[str, bytes | str] | None:
    """Ask the engine to run the hook for ``raw``.

    ``("out", stdout bytes)`` when it did; ``("local", "")`` when the event must run here (Stop,
    bad input); ``("error", code)`` with a ``protocol`` ERR_* code when the engine could not
    answer; None when the fast path does not apply (no Unix sockets, a payload too large).
    """
    import _socket

    from memself.engine.protocol import ERR_UNREACHABLE, ERR_UNSAFE_DIR, MAX_REQUEST_BYTES

    if not hasattr(_socket, "AF_UNIX"):
        return None  # the TCP fallback (token, port file) is the full client's job
    body = _request(host, raw, started, timeout_s if wait_ready else 0.0)
    if len(body) > MAX_REQUEST_BYTES:
        return None
    deadline = time.monotonic() + timeout_s

    from memself.engine.location import dir_state, locate, recorded_socket

    location = locate(data_root())
    state = dir_state(location.runtime_dir)
    reply: bytes | str | None = None
    if state == "private":
        reply = _exchange(location.socket_path, body, deadline)
    if reply is None:
        # Not where we look first: an engine started with another runtime directory, or in its
        # own private one because ours is unsafe. One small read, and only after a miss.
        recorded = recorded_socket(location)
        if recorded is not None:
            reply = _exchange(recorded, body, deadline)
    if reply is None:
        return ("error", ERR_UNSAFE_DIR if state == "unsafe" else ERR_UNREACHABLE)
    if isinstance(reply, str):
        return ("error", reply)
    return _parse_reply(reply)


def _exchange(path: str, body: bytes, deadline: float) -> bytes | str | None:
    """Send the request frame to the engine at ``path``: its reply, an ERR_* code, or None
    when nobody listens there."""
    import _socket

    from memself.engine.location import own_uid
    from memself.engine.peercred import peer_allowed, peer_uid
    from memself.engine.protocol import (
        ERR_PROTOCOL,
        ERR_REFUSED,
        ERR_TIMEOUT,
        ERR_UNREACHABLE,
        HEADER_BYTES,
        MAX_RESPONSE_BYTES,
    )

    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return ERR_UNREACHABLE
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return None  # no engine here, or the stale socket file of a crashed one
        if not peer_allowed(peer_uid(sock), own_uid()):
            return ERR_REFUSED
        sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)
        size = int.from_bytes(_recv_exact(sock, HEADER_BYTES, deadline), "big")
        if size > MAX_RESPONSE_BYTES:
            return ERR_PROTOCOL
        return _recv_exact(sock, size, deadline)
    except TimeoutError:
        return ERR_TIMEOUT
    except EOFError:
        return ERR_PROTOCOL
    except OSError:  # reset mid-request: the engine died or exited
        return ERR_UNREACHABLE
    finally:
        sock.close()


def _request(host: str, raw: bytes, started: float, wait_ready_s: float = 0.0) -> bytes:
    """The request frame's body, as ``json.dumps`` of protocol.py's request would read.
    ``wait_ready_s``: how long a loading engine may wait for its warm-up before answering (a
    little less than the caller waits for the reply, so "not ready" still arrives in time)."""
    import binascii

    import memself
    from memself.engine.location import code_fingerprint
    from memself.engine.protocol import PROTOCOL_VERSION

    local = time.localtime(started)
    env = ",".join(
        f"{_json_str(key)}:{_json_str(os.environ[key])}" for key in FORWARDED_ENV if key in os.environ
    )
    payload = (
        f'{{"host":{_json_str(host)},'
        f'"stdin":"{binascii.b2a_base64(raw, newline=False).decode("ascii")}",'
        f'"env":{{{env}}},"home":{_json_str(os.path.expanduser("~"))},'
        f'"started":{started!r},"utcoffset":{int(local.tm_gmtoff or 0)},'
        f'"zone":{_json_str(local.tm_zone or "")}}}'
    )
    wait = f'"wait_s":{round(max(0.0, wait_ready_s - _REPLY_MARGIN_S), 3)!r},' if wait_ready_s else ""
    text = (
        f'{{"v":{PROTOCOL_VERSION},"op":"{OP_HOOK_FORWARD}","payload":{payload},{wait}'
        f'"version":{_json_str(memself.__version__)},'
        f'"fingerprint":{_json_str(code_fingerprint())}}}'
    )
    return text.encode("utf-8", errors="backslashreplace")


def data_root() -> str:
    """``memself.paths.data_root()`` as a string: that module imports pathlib (~25 ms here).
    A test keeps the two equal."""
    override = os.environ.get("MEMSELF_HOME", "").strip()
    if override:
        return os.path.expanduser(override)
    return os.path.join(os.path.expanduser("~"), ".memory-self-evolution")


def _json_str(text: str) -> str:
    return '"' + text.translate(_JSON_ESCAPES) + '"'


def _parse_reply(reply: bytes) -> tuple[str, bytes | str]:
    from memself.engine.protocol import ERR_PROTOCOL

    if reply.startswith(_REPLY_PREFIX) and reply.endswith(_REPLY_SUFFIX):
        import binascii

        try:
            return ("out", binascii.a2b_base64(reply[len(_REPLY_PREFIX) : -len(_REPLY_SUFFIX)]))
        except (binascii.Error, ValueError):
            return ("error", ERR_PROTOCOL)
    import json  # any other shape: an error, or "run it locally"

    try:
        message = json.loads(reply)
    except (UnicodeDecodeError, ValueError):
        return ("error", ERR_PROTOCOL)
    if not isinstance(message, dict):
        return ("error", ERR_PROTOCOL)
    result = message.get("result")
    if message.get("ok") is True and isinstance(result, dict):
        stdout = result.get("stdout")
        if isinstance(stdout, str):  # same answer, other spelling (a future server's json)
            import binascii

            try:
                return ("out", binascii.a2b_base64(stdout))
            except (binascii.Error, ValueError):
                return ("error", ERR_PROTOCOL)
        if result.get("local") is True:
            return ("local", "")
        return ("error", ERR_PROTOCOL)
    code = message.get("error")
    return ("error", code if isinstance(code, str) and code else ERR_PROTOCOL)


def _recv_exact(sock: object, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)  # type: ignore[attr-defined]
        chunk = sock.recv(min(remaining, 1 << 16))  # type: ignore[attr-defined]
        if not chunk:
            raise EOFError  # closed mid-frame
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def agent_arg(argv: list[str]) -> str:
    """The ``--agent HOST`` value, lower-cased; "" when missing."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--agent" and i + 1 < len(args):
            return args[i + 1].strip().lower()
        if arg.startswith("--agent="):
            return arg.split("=", 1)[1].strip().lower()
    return ""


def read_bounded(stream: BinaryIO | None, limit: int, timeout_s: float) -> tuple[bytes, bool, bool]:
    """Read at most ``limit`` bytes; drain and drop the rest (the host must not block on a full
    pipe). Returns ``(data, truncated, timed_out)``."""
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


def _stdin_buffer() -> BinaryIO | None:
    if sys.stdin is None:
        return None
    return getattr(sys.stdin, "buffer", sys.stdin)  # type: ignore[return-value]
