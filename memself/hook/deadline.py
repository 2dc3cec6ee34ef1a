"""The hook process's hard deadline: whatever the hook is doing when it passes, the host gets its
"no answer" output and the process exits 0, before the host's own timeout kills it.

The deadline counts from the process's own start (``/proc/self/stat``), not from when Python got
around to this module: on a loaded machine the interpreter start and the imports alone can take
seconds. It is armed as early as possible (``memself/hooks/entry.py``, right after finding the
package) from the hook's command line: installers register one command per event, carrying the timeout
the host was given for it and the host's "no answer" output (``hooks.command``, from the
adapters), so no host table is needed here. A command registered by an older install carries
neither: the shortest deadline any host's registration gives stands until the local run knows
the adapter (``learn``), and the "no answer" output is asked of the adapter before the alarm is
set. The alarm is ``SIGALRM`` through ``_signal`` (built in: ``signal`` would import ``enum``,
which the fast path avoids); its handler runs in the main thread between two bytecodes, also
while the hook sleeps or waits on a socket, a pipe or a lock, and also half-way through an
import: so the handler imports nothing, since what it would import may be the module that is
half-initialised right then.

A deadline is a share of the registered timeout, less a margin for the host's spawn of the
process and the exit. Nothing but ``os``, ``sys`` and ``time`` is imported here, except for an
older install's command: then ``json`` and the adapters, once, before the alarm is set.

Platforms without ``SIGALRM`` (Windows) arm nothing; ``memself.hook.run`` then keeps its watchdog
thread.
"""

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing is a large share of the hook's start-up
    from collections.abc import Callable, Sequence

# The hook's own arguments after ``--agent HOST``, written by the installers (``hooks.command``).
TIMEOUT_ARG = "--timeout"  # seconds the host gives this event's hook
EMPTY_REPLY_ARG = "--empty-reply"  # the host's "no answer" output, when that is not empty output
SHARE = 0.8  # of the host's registered timeout
# Taken off that share: the host's spawn of the process (before its start time) and the exit.
EXIT_MARGIN_S = 0.2
# Seconds from the process's start when the registered timeout is not known (a hook registered
# by an older install): the deadline of the shortest timeout any host registers, read from the
# hosts' facts only when first needed (the fast path imports nothing of the hosts). None until then.
FALLBACK_S: float | None = None
# Kept free at the end for what must follow a wait: after giving up on the engine, the hook
# still runs the core in this process; after Stop's wait for judge jobs, it still renders.
LOCAL_RESERVE_S = 1.0
STOP_RESERVE_S = 2.0
# Once the deadline has passed, the expiry log line gets this long before the process just exits.
_GRACE_S = 0.25
_NONE, _WRITING, _WRITTEN = 0, 1, 2


class _State:
    deadline: float | None = None  # seconds after the process started
    timeout_known = False  # the deadline comes from the registered timeout, not the fallback
    registered_s: float | None = None  # the timeout on the command line, armed or not
    empty_reply = b""
    answer = _NONE
    expired = False
    final = False
    on_expire: "Callable[[], None] | None" = None
    started_boot: float | None = None


_state = _State()
_IMPORTED = time.monotonic()


def deadline_for(timeout_s: float | None) -> float:
    """Seconds from the process's start for a hook the host gives ``timeout_s``; the fallback
    when that is not known."""
    if timeout_s is None:
        return fallback_s()
    return SHARE * timeout_s - EXIT_MARGIN_S


def fallback_s() -> float:
    """The deadline when the registered timeout is not known (``FALLBACK_S``)."""
    global FALLBACK_S
    if FALLBACK_S is None:
        from memself.hosts import FACTS

        shortest = min(t for facts in FACTS.values() for t in facts.timeouts.values())
        FALLBACK_S = SHARE * shortest - EXIT_MARGIN_S
    return FALLBACK_S


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


def arm(host: str, argv: "Sequence[str]" = ()) -> bool:
    """Arm the alarm for the hook of ``host`` run with the arguments ``argv`` (its registered
    timeout and "no answer" output, when the command carries them); False where there is no
    SIGALRM.

    Called by the hook process only (the entry, ``memself hook``): an in-process caller would be
    ended by it.
    """
    timeout = _seconds(_arg(argv, TIMEOUT_ARG))
    reply = _arg(argv, EMPTY_REPLY_ARG)
    _state.timeout_known = timeout is not None
    _state.registered_s = timeout
    if reply is not None:
        _state.empty_reply = reply.encode("utf-8", errors="replace") + b"\n"
    elif timeout is not None:  # a registered command names the reply only when it is not empty
        _state.empty_reply = b""
    else:  # an older install's command: known before the alarm can fire, never in its handler
        _state.empty_reply = _adapter_empty_reply(host)
    return _set(deadline_for(timeout))


def learn(timeout_s: float | None) -> None:
    """The event's timeout from the host's adapter, once the local run knows it: replaces the
    fallback for a hook registered by an older install. A timeout on the command line stands:
    it is what the host was told."""
    if _state.deadline is None:
        return
    if not _state.timeout_known and timeout_s is not None:
        _state.timeout_known = True
        _set(deadline_for(timeout_s))


def _set(deadline: float) -> bool:
    try:
        if TYPE_CHECKING:  # _signal has no stub of its own; signal re-exports the same functions
            import signal as _signal
        else:
            import _signal
    except ImportError:  # pragma: no cover - every CPython has it
        return False
    from memself.platform.signals import alarm_available

    if not alarm_available(_signal):
        return False
    _state.deadline = deadline
    try:
        _signal.signal(_signal.SIGALRM, _on_alarm)
        _signal.setitimer(_signal.ITIMER_REAL, max(deadline - process_age(), 0.001))
    except (OSError, ValueError):  # not the main thread
        _state.deadline = None
        return False
    return True


def _arg(argv: "Sequence[str]", name: str) -> str | None:
    """The value of ``name VALUE`` or ``name=VALUE`` in ``argv``; None when absent."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _seconds(value: str | None) -> float | None:
    """A positive number of seconds, or None."""
    try:
        seconds = float(value) if value is not None else 0.0
    except ValueError:
        return None
    return seconds if 0 < seconds < 1e6 else None


def registered_timeout() -> float | None:
    """The host's timeout as the registered command line gives it; None for a command without
    one (an older install's) or outside the hook process. Where no alarm exists (Windows) the
    local run's watchdog counts from it, as the alarm would."""
    return _state.registered_s


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


def on_expire(callback: "Callable[[], None] | None") -> None:
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
    try:
        if _state.empty_reply:
            os.write(1, _state.empty_reply)
    except OSError:
        pass


def _adapter_empty_reply(host: str) -> bytes:
    """The "no answer" output of a hook whose command line did not carry it (an older install),
    from the adapter, as the local run would print it for any event."""
    try:
        import json

        from memself.hosts import HOSTS
        from memself.hosts.base import EventKind, HookEvent, HookReply

        adapter = HOSTS[host]
        rendered = adapter.render(HookEvent(host, EventKind.UNKNOWN, "", "", "", "", "", False), HookReply())
        if rendered is None:
            return b""
        return json.dumps(rendered, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except Exception:  # an unknown host, a broken install: answer with empty output
        return b""


def _finish(answered_nothing: bool) -> None:
    _state.final = True
    callback = _state.on_expire
    if callback is not None and answered_nothing:
        try:
            if TYPE_CHECKING:  # as in _set
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
