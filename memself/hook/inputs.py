"""What the hook process is given: its ``--agent`` and ``--event`` arguments, the event on stdin,
read within bounds, and the data directory's path.

Standard library only, and nothing but ``os``, ``sys`` and ``time`` (``select`` when stdin is a
pipe): the hook process imports this before it knows whether the warm engine will answer, and
``pathlib``, ``typing`` or ``json`` would cost it more than the whole fast path.
"""

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs the hook process a noticeable import
    from typing import BinaryIO

# The hook's own argument after ``--agent HOST`` naming the event it is registered for
# (``hooks.command``): the hook process knows what it runs for without a table of host event names.
EVENT_ARG = "--event"
# The kinds of event (``EventKind`` values) the warm engine answers; the rest run in the hook
# process (a Stop may wait seconds for judge jobs).
ENGINE_EVENTS = ("session_start", "prompt_submit")
MAX_STDIN_BYTES = 1 << 20  # a larger payload is read to the end and dropped, not parsed
STDIN_TIMEOUT_S = 3.0  # hosts close stdin at once; never wait on one that does not


class Stdin:
    """What the hook read from stdin: at most ``MAX_STDIN_BYTES`` of it (``raw``), whether more
    came (``truncated``: the rest was drained and dropped) and whether the host left stdin open
    past ``STDIN_TIMEOUT_S`` (``timed_out``: ``raw`` is what came until then)."""

    __slots__ = ("raw", "timed_out", "truncated")

    def __init__(self, raw: bytes, truncated: bool = False, timed_out: bool = False) -> None:
        self.raw = raw
        self.truncated = truncated
        self.timed_out = timed_out


def agent_arg(argv: list[str]) -> str:
    """The ``--agent HOST`` value, lower-cased; "" when missing."""
    return _arg(argv, "--agent")


def event_arg(argv: list[str]) -> str:
    """The ``--event KIND`` value (an ``EventKind`` value: the event the installers registered
    the command for), lower-cased; "" when missing (an older install's command, ``memself hook``)."""
    return _arg(argv, EVENT_ARG)


def _arg(argv: list[str], name: str) -> str:
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1].strip().lower()
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1].strip().lower()
    return ""


def read_stdin() -> Stdin:
    """The process's own stdin, bounded."""
    return read_bounded(stdin_buffer(), MAX_STDIN_BYTES, STDIN_TIMEOUT_S)


def read_bounded(stream: "BinaryIO | None", limit: int, timeout_s: float) -> Stdin:
    """Read at most ``limit`` bytes; drain and drop the rest (the host must not block on a full
    pipe); stop waiting after ``timeout_s``."""
    if stream is None:
        return Stdin(b"")
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        data = stream.read(limit + 1) or b""
        truncated = len(data) > limit
        while truncated and stream.read(1 << 16):
            pass
        return Stdin(data[:limit], truncated)
    if os.isatty(fd):
        return Stdin(b"")  # started by hand: do not wait for someone to type
    chunks: list[bytes] = []
    size = 0
    truncated = False
    deadline = time.monotonic() + timeout_s
    # Hosts write the payload as they start the hook, so it is usually there by the time this
    # runs: non-blocking reads take it without loading ``select``, which is asked only to wait.
    nonblocking = _set_nonblocking(fd)
    try:
        while True:
            if not nonblocking and not _wait_readable(fd, deadline):
                return Stdin(b"".join(chunks), truncated, timed_out=True)
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                if not _wait_readable(fd, deadline):
                    return Stdin(b"".join(chunks), truncated, timed_out=True)
                continue
            if not chunk:
                return Stdin(b"".join(chunks), truncated)
            room = limit - size
            if room > 0:
                chunks.append(chunk[:room])
                size += min(room, len(chunk))
            if len(chunk) > max(room, 0):
                truncated = True
    finally:
        if nonblocking:
            _restore_blocking(fd)


def _set_nonblocking(fd: int) -> bool:
    """True when ``fd`` now reads without blocking (POSIX; Windows' pipes cannot before 3.12)."""
    if os.name == "nt":
        return False
    try:
        if not os.get_blocking(fd):
            return False  # someone else's choice: leave it, and wait through select
        os.set_blocking(fd, False)
    except OSError:
        return False
    return True


def _restore_blocking(fd: int) -> None:
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass


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


def stdin_buffer() -> "BinaryIO | None":
    """The bytes under ``sys.stdin``; None when the host started the process without a stdin."""
    stdin = sys.stdin
    return None if stdin is None else stdin.buffer


def stdout_buffer() -> "BinaryIO | None":
    """The bytes under ``sys.stdout``; None when the host started the process without a stdout."""
    stdout = sys.stdout
    return None if stdout is None else stdout.buffer
