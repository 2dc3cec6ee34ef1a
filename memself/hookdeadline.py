"""The hook process's hard deadline: whatever the hook is doing when it passes, the host gets its
"no answer" output and the process exits 0, before the host's own timeout kills it.

The deadline counts from the process's own start (``/proc/self/stat``), not from when Python got
around to this module: on a loaded machine the interpreter start and the imports alone can take
seconds. It is armed as early as possible (``memself/hooks/entry.py``, right after finding the package)
with the host's shortest deadline, then re-armed with the event's own one as soon as the event is
known. The alarm is ``SIGALRM`` through ``_signal`` (built in: ``signal`` would import ``enum``,
which the fast path avoids); its handler runs in the main thread between two bytecodes, also
while the hook sleeps or waits on a socket, a pipe or a lock.

Deadlines are 80 % of the timeout the installers register for each host and event (adapters'
``TIMEOUTS``; a test keeps the two tables together) less 0.2 s for the host's spawn and the
exit: 3.8 s for Cursor's 5 s prompt hook, so the host sees it end within 4 s.
Standard library only, and nothing but ``os``, ``sys`` and ``time``.

Platforms without ``SIGALRM`` (Windows) arm nothing; ``hookrun`` then keeps its watchdog thread.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs the hook ~25 ms
    from collections.abc import Callable

SHARE = 0.8  # of the host's registered timeout
# Taken off that share: the host's spawn of the process (before its start time) and the exit.
EXIT_MARGIN_S = 0.2
# host -> event kind (``EventKind`` values) -> seconds from the process's start:
# SHARE x timeout - EXIT_MARGIN_S.
DEADLINES: dict[str, dict[str, float]] = {
    "claude": {"session_start": 7.8, "prompt_submit": 7.8, "stop": 15.8},
    "cursor": {"session_start": 7.8, "prompt_submit": 3.8, "stop": 15.8},
    "codebuddy": {"session_start": 7.8, "prompt_submit": 7.8, "stop": 15.8},
    "workbuddy": {"session_start": 7.8, "prompt_submit": 7.8, "stop": 15.8},
}
FALLBACK_S = 3.8  # an unknown host: the shortest deadline of any
# What each host reads as "no answer" (``render(event, HookReply())``; a test checks it): Cursor
# wants JSON on every answer, the others take empty output.
NOTHING: dict[str, bytes] = {"cursor": b"{}\n"}
# Kept free at the end for what must follow a wait: after giving up on the engine, the hook
# still runs the core in this process; after Stop's wait for judge jobs, it still renders.
LOCAL_RESERVE_S = 1.0
STOP_RESERVE_S = 2.0
# Once the deadline has passed, the expiry log line gets this long before the process just exits.
_GRACE_S = 0.25
# Host event names (lower case) -> kind, for a look at the raw payload before it is parsed.
_KINDS = {
    b"sessionstart": "session_start",
    b"userpromptsubmit": "prompt_submit",
    b"beforesubmitprompt": "prompt_submit",
    b"stop": "stop",
    b"subagentstop": "stop",
}

_NONE, _WRITING, _WRITTEN = 0, 1, 2


class _State:
    host = ""
    deadline: float | None = None  # seconds after the process started
    answer = _NONE
    expired = False
    final = False
    on_expire: Callable[[], None] | None = None
    started_boot: float | None = None


_state = _State()
_IMPORTED = time.monotonic()


def deadline_for(host: str, kind: str | None = None) -> float:
    """Seconds from the process's start for ``host``'s ``kind`` event; without a kind the host's
    shortest (the event is not known yet)."""
    table = DEADLINES.get(host)
    if not table:
        return FALLBACK_S
    if kind is not None and kind in table:
        return table[kind]
    return min(table.values())


def process_age() -> float:
    """Seconds since this process started: interpreter start-up and imports included."""
    if _state.started_boot is None:
        _state.started_boot = _process_start()
    if _state.started_boot is not None:
        return time.clock_gettime(time.CLOCK_BOOTTIME) - _state.started_boot
    return time.monotonic() - _IMPORTED


def _process_start() -> float | None:
    """The start time in CLOCK_BOOTTIME seconds (``starttime`` of ``/proc/self/stat``, in clock
    ticks since boot); None off Linux."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        # Field 22; the command name (field 2) may hold spaces and ")", so count from the last ")".
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def arm(host: str, kind: str | None = None) -> bool:
    """(Re)arm the alarm at ``host``'s deadline for ``kind``; False where there is no SIGALRM.

    Called by the hook process only (the entry, ``memself hook``): an in-process caller would be
    ended by it.
    """
    try:
        if TYPE_CHECKING:  # _signal has no stub of its own; signal re-exports the same functions
            import signal as _signal
        else:
            import _signal
    except ImportError:  # pragma: no cover - every CPython has it
        return False
    if not hasattr(_signal, "setitimer") or not hasattr(_signal, "SIGALRM"):
        return False
    _state.host = host
    _state.deadline = deadline_for(host, kind)
    try:
        _signal.signal(_signal.SIGALRM, _on_alarm)
        _signal.setitimer(_signal.ITIMER_REAL, max(_state.deadline - process_age(), 0.001))
    except (OSError, ValueError):  # not the main thread
        _state.deadline = None
        return False
    return True


def arm_for_payload(host: str, raw: bytes) -> None:
    """Re-arm with the event's own deadline when a cheap look at the raw payload names it (the
    full parse comes later and re-arms again); otherwise the armed one stays."""
    if _state.deadline is None:
        return
    kind = payload_kind(raw)
    if kind is not None:
        arm(host, kind)


def payload_kind(raw: bytes) -> str | None:
    """The kind named by ``"hook_event_name": "<name>"`` in ``raw``; None when not found as a
    plain string (escapes, odd spacing: the parse decides later)."""
    at = raw.find(b'"hook_event_name"')
    if at < 0:
        return None
    rest = raw[at + len(b'"hook_event_name"') : at + 120].lstrip(b" \t\r\n")
    if not rest.startswith(b":"):
        return None
    rest = rest[1:].lstrip(b" \t\r\n")
    end = rest.find(b'"', 1)
    if not rest.startswith(b'"') or end < 0:
        return None
    return _KINDS.get(rest[1:end].strip().lower())


def armed() -> bool:
    return _state.deadline is not None


def remaining(reserve: float = 0.0) -> float | None:
    """Seconds left before the deadline, less ``reserve``; None when no deadline is armed."""
    if _state.deadline is None:
        return None
    return _state.deadline - process_age() - reserve


def budget(cap: float, reserve: float) -> float:
    """How long a wait may last: ``cap``, cut so that ``reserve`` seconds remain before the
    deadline (0 when they do not); ``cap`` when no deadline is armed (inside the engine)."""
    left = remaining(reserve)
    if left is None:
        return cap
    return max(0.0, min(cap, left))


def on_expire(callback: Callable[[], None] | None) -> None:
    """Run ``callback`` (a log line) after the "no answer" output when the deadline passes."""
    _state.on_expire = callback


def begin_answer() -> bool:
    """Claim the answer before writing it; False when the deadline already answered. Always
    True where nothing is armed (the engine answers hook after hook in one process)."""
    if _state.deadline is None:
        return True
    if _state.answer != _NONE:
        return False
    _state.answer = _WRITING
    return True


def end_answer() -> None:
    """The answer is out. If the deadline passed while it was written, end now."""
    if _state.deadline is None:
        return
    _state.answer = _WRITTEN
    if _state.expired:
        _finish(answered_nothing=False)


def _on_alarm(signum: int, frame: object) -> None:
    if _state.final:  # the grace for the log line is over too
        os._exit(0)
    _state.expired = True
    if _state.answer == _WRITING:
        return  # the real answer is being written: ``end_answer`` ends the process
    answered_nothing = _state.answer == _NONE
    if answered_nothing:
        _state.answer = _WRITTEN
        _write_nothing()
    _finish(answered_nothing)


def _write_nothing() -> None:
    data = NOTHING.get(_state.host, b"")
    try:
        if data:
            os.write(1, data)
    except OSError:
        pass


def _finish(answered_nothing: bool) -> None:
    _state.final = True
    callback = _state.on_expire
    if callback is not None and answered_nothing:
        try:
            if TYPE_CHECKING:  # as in arm
                import signal as _signal
            else:
                import _signal

            _signal.setitimer(_signal.ITIMER_REAL, _GRACE_S)
            callback()
        except BaseException:  # past the deadline nothing may keep the process alive
            pass
    try:
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(0)
