"""Talking to the warm engine from the CLI, the MCP server, the judge and the local hook's recall:
requests as dicts, the engine's start, status and stop.

Standard library only and cheap to import: no pathlib, no hashlib, subprocess only when an
engine must be spawned; the connection itself is ``transport``'s, which the hook process's fast
client shares. Every failure surfaces as ``EngineRequestError`` (an ``EngineUnavailable``) with a
``code`` from ``protocol``; the hook then answers without recall.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

from memself.engine import instance_lock, transport
from memself.engine.location import code_fingerprint, locate
from memself.engine.protocol import (
    ERR_BUSY,
    ERR_PROTOCOL,
    ERR_SPAWN,
    ERR_TIMEOUT,
    ERR_UNREACHABLE,
    ERR_UNSAFE_DIR,
    ERR_VERSION_MISMATCH,
    MAX_REQUEST_BYTES,
    MESSAGES,
    OP_PING,
    OP_RECALL,
    OP_STATUS,
    OP_STOP,
    PROTOCOL_VERSION,
    FrameError,
    decode,
    encode,
)
from memself.errors import EngineUnavailable, MemselfError
from memself.launcher import python_command
from memself.platform import children

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    from memself.engine.location import EngineLocation
    from memself.paths import DataPaths

# The model reads a few hundred tokens; a longer prompt only costs transfer time.
RECALL_TEXT_MAX_CHARS = 20_000
# Leave the engine this much of the caller's budget to say "not ready" before the client gives up.
_REPLY_MARGIN_S = 0.05
_FD_DIR = "/dev/fd"
_SPAWNED: list[subprocess.Popen[bytes]] = []
_SPAWNED_PIDS: list[int] = []
# Engines spawned without a handed-over lock: data dir -> (pid, time.monotonic() of the spawn).
_STARTING: dict[str, tuple[int, float]] = {}
_START_GRACE_S = 30.0
_START_LOCK = _thread.allocate_lock()


class EngineRequestError(EngineUnavailable):
    """The engine could not answer; ``code`` says why (one of the ERR_* codes of ``protocol``)."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or MESSAGES.get(code, code))
        self.code = code


class EngineClient:
    """One data directory's engine, seen from a client. Each request is one short connection."""

    def __init__(
        self, paths: DataPaths, *, version: str | None = None, fingerprint: str | None = None
    ) -> None:
        import memself

        self.paths = paths
        self.location = locate(paths.root)
        self.version = version if version is not None else memself.__version__
        self.fingerprint = fingerprint if fingerprint is not None else code_fingerprint()

    def request(
        self,
        op: str,
        payload: dict[str, Any] | None = None,
        timeout_s: float = 2.0,
        *,
        wait_ready_s: float = 0.0,
    ) -> dict[str, Any]:
        """Send ``op`` and return the engine's result dict; EngineRequestError on any failure.

        ``wait_ready_s``: how long a service op may wait for a warming-up engine (capped by
        ``timeout_s``); 0 means "answer not-ready at once".
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        message: dict[str, Any] = {
            "v": PROTOCOL_VERSION,
            "op": op,
            "payload": payload or {},
            "version": self.version,
            "fingerprint": self.fingerprint,
        }
        if wait_ready_s > 0:
            message["wait_s"] = round(max(0.0, min(wait_ready_s, timeout_s - _REPLY_MARGIN_S)), 3)
        try:
            sock, token = transport.connect(self.location, deadline)
            try:
                if token is not None:
                    message["token"] = token
                body = encode(message, MAX_REQUEST_BYTES)
                response = decode(transport.exchange(sock, body, deadline))
            finally:
                sock.close()
        except FrameError as exc:
            raise EngineRequestError(exc.code, exc.message) from None
        result = response.get("result")
        if response.get("ok") is True and isinstance(result, dict):
            return result
        code = response.get("error")
        text = response.get("message")
        raise EngineRequestError(
            code if isinstance(code, str) else ERR_PROTOCOL, text if isinstance(text, str) and text else None
        )

    def ping(self, timeout_s: float = 0.5) -> dict[str, Any]:
        """``{"version", "fingerprint", "pid", "ready", "state"}`` of the running engine."""
        return self.request(OP_PING, None, timeout_s)

    def status(self, timeout_s: float = 1.0) -> dict[str, Any]:
        """Everything ``memself engine status`` shows."""
        return self.request(OP_STATUS, None, timeout_s)

    def matches(self, info: dict[str, Any]) -> bool:
        """True if a ping answer comes from an engine running this very code."""
        return info.get("version") == self.version and info.get("fingerprint") == self.fingerprint


def spawn_engine(paths: DataPaths, *, idle_minutes: float | None = None, replace: bool = False) -> int | None:
    """Start an engine for ``paths`` detached from the caller; its pid, or None if one is
    already starting or running.

    The client takes the single-instance lock itself and hands the locked fd to the child, so
    concurrent hooks cannot start two engines during the child's own start-up. ``replace``: an
    old engine is still exiting and holds the lock (version change); spawn anyway, the child
    waits for the lock.

    An isolated interpreter with site (``memself.launcher``) runs the engine: it imports the code
    the client runs (wheel or source tree) and the installed dependencies, never a module from
    the caller's working directory (the opened project) or ``PYTHONPATH``.
    """
    _reap()
    if not sys.executable:
        raise EngineRequestError(ERR_SPAWN, f"{MESSAGES[ERR_SPAWN]}：找不到 Python 解释器")
    location = locate(paths.root)
    lock_fd: int | None = None
    if instance_lock.can_hand_over():
        try:
            # The lock lives in the data directory; the engine picks its runtime directory.
            os.makedirs(location.data_dir, mode=0o700, exist_ok=True)
            lock_fd = instance_lock.try_lock(location.lock_path)
            if lock_fd is not None:
                lock_fd = instance_lock.above_stdio(lock_fd)
        except OSError as exc:
            raise EngineRequestError(ERR_SPAWN, f"{MESSAGES[ERR_SPAWN]}：{exc}") from None
        if lock_fd is None and not replace:
            return None
    else:
        # Without a lock to hand over, an engine takes its own once it runs: until then, the
        # child spawned here a moment ago is the one starting (threads of one process agree
        # under _START_LOCK; another process's spawn exits when it finds the lock taken).
        _START_LOCK.acquire()
        try:
            if not replace and (
                instance_lock.is_held(location.lock_path) or _still_starting(location.data_dir)
            ):
                return None
            return _spawn(paths, location, None, idle_minutes)
        finally:
            _START_LOCK.release()
    return _spawn(paths, location, lock_fd, idle_minutes)


def _spawn(
    paths: DataPaths, location: EngineLocation, lock_fd: int | None, idle_minutes: float | None
) -> int:
    env = dict(os.environ)
    command = python_command("memself.warm", "serve", "--data-dir", str(paths.root))
    if idle_minutes is not None:
        command += ["--idle-minutes", repr(float(idle_minutes))]
    if lock_fd is not None:
        command += ["--lock-fd", str(lock_fd)]
    try:
        try:
            if not (children.posix_spawn_detached() and os.path.isdir(_FD_DIR)):
                raise NotImplementedError
            pid = _spawn_posix(command, env, lock_fd)
        except NotImplementedError:  # no posix_spawn, no /dev/fd, or no POSIX_SPAWN_SETSID
            pid = _spawn_subprocess(command, env, lock_fd)
    except OSError as exc:
        raise EngineRequestError(ERR_SPAWN, f"{MESSAGES[ERR_SPAWN]}：{exc}") from None
    finally:
        if lock_fd is not None:
            instance_lock.release(lock_fd)  # the child's copy of the fd keeps the lock
    if lock_fd is None:
        _STARTING[location.data_dir] = (pid, time.monotonic())
    return pid


def _still_starting(data_dir: str) -> bool:
    """True while an engine this process spawned for ``data_dir`` runs and is young enough to
    be still on its way to the lock."""
    started = _STARTING.get(data_dir)
    if started is None:
        return False
    pid, at = started
    running = any(process.pid == pid and process.poll() is None for process in _SPAWNED)
    if running and time.monotonic() - at < _START_GRACE_S:
        return True
    del _STARTING[data_dir]
    return False


def _spawn_posix(command: list[str], env: dict[str, str], keep_fd: int | None) -> int:
    # posix_spawn instead of subprocess: importing subprocess costs the hook far more than the
    # spawn itself (vfork underneath; bench/bench_hooks.py). It has no close_fds, so close every
    # inheritable descriptor the host may have given us: an engine holding the host's pipe open
    # would keep the host waiting for EOF for as long as the engine lives.
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    for name in os.listdir(_FD_DIR):
        fd = int(name) if name.isdigit() else -1
        if fd <= 2 or fd == keep_fd:
            continue
        try:
            if os.get_inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        except OSError:
            continue  # the listing's own descriptor, already closed
    if keep_fd is not None:
        os.set_inheritable(keep_fd, True)
    pid = os.posix_spawn(command[0], command, env, file_actions=actions, setsid=True)
    _SPAWNED_PIDS.append(pid)
    return pid


def _spawn_subprocess(command: list[str], env: dict[str, str], keep_fd: int | None) -> int:
    keep = (keep_fd,) if keep_fd is not None else ()
    process = children.popen_detached_child(command, env, keep, cwd=os.path.abspath(os.sep))
    _SPAWNED.append(process)
    pid: int = process.pid
    return pid


def _reap() -> None:
    # Long-lived callers (MCP server, CLI, tests) collect their exited engines here; a hook
    # exits first and the engine is adopted by init.
    for process in list(_SPAWNED):
        if process.poll() is not None:
            _SPAWNED.remove(process)
    for pid in list(_SPAWNED_PIDS):
        if children.reap(pid):
            _SPAWNED_PIDS.remove(pid)


def ensure_started(
    paths: DataPaths, *, idle_minutes: float | None = None, client: EngineClient | None = None
) -> str:
    """Make sure an engine of this code serves ``paths``, without waiting for it.

    Returns "running" (a matching engine answered), "starting" (one holds the lock but does not
    listen yet), "spawned" (none was there), "restarted" (one of another version was told to stop
    and a new one spawned) or "unresponsive" (one holds the lock but does not answer in time).
    An unsafe runtime directory is no reason not to spawn: the engine listens in a private one
    of its own. Raises EngineRequestError only for a failed spawn.
    """
    _reap()
    client = client or EngineClient(paths)
    try:
        info = client.ping(timeout_s=0.3)
    except EngineRequestError as exc:
        if spawn_engine(paths, idle_minutes=idle_minutes) is not None:
            return "spawned"
        return "starting" if exc.code in (ERR_UNREACHABLE, ERR_UNSAFE_DIR) else "unresponsive"
    if client.matches(info):
        return "running"
    try:
        client.request(OP_STOP, None, 0.5)
    except EngineRequestError:
        pass
    spawn_engine(paths, idle_minutes=idle_minutes, replace=True)
    return "restarted"


def recall_or_none(
    paths: DataPaths,
    text: str,
    budget_s: float,
    *,
    options: dict[str, Any] | None = None,
    client: EngineClient | None = None,
) -> dict[str, Any] | None:
    """The hook's recall: the service's ``recall`` result, or None within ``budget_s``.

    None means "answer without recall this turn": no engine (one is spawned for the next turn),
    an engine still loading past the budget, an engine of another version (replaced), or any
    other failure. Never raises for engine trouble.
    """
    client = client or EngineClient(paths)
    payload = dict(options or {})
    payload["text"] = text[:RECALL_TEXT_MAX_CHARS]
    try:
        return client.request(OP_RECALL, payload, budget_s, wait_ready_s=budget_s)
    except (EngineRequestError, OSError) as exc:
        code = exc.code if isinstance(exc, EngineRequestError) else ERR_UNREACHABLE
        try:
            if code in (ERR_UNREACHABLE, ERR_UNSAFE_DIR, ERR_VERSION_MISMATCH):
                # Gone (a no-op if another engine is starting), or exiting: the new one waits
                # for the old one's lock. With our runtime directory unsafe, it uses its own.
                spawn_engine(paths, replace=code == ERR_VERSION_MISMATCH)
        except (OSError, EngineUnavailable):
            pass
        return None


def call_engine(
    paths: DataPaths, op: str, payload: dict[str, Any] | None = None, timeout_s: float = 60.0
) -> dict[str, Any]:
    """For callers that can wait (CLI, MCP, judge): start the engine if needed, wait until it is
    ready (the first start loads the model: seconds) and return the result of ``op``."""
    client = EngineClient(paths)
    deadline = time.monotonic() + timeout_s
    # An engine that dies at start-up (broken install) must not be respawned every 50 ms.
    spawns_left = 3
    if ensure_started(paths, client=client) in ("spawned", "restarted"):
        spawns_left -= 1
    while True:
        left = deadline - time.monotonic()
        try:
            return client.request(op, payload, max(left, 0.001), wait_ready_s=left)
        except EngineRequestError as exc:
            if exc.code not in (ERR_UNREACHABLE, ERR_UNSAFE_DIR, ERR_VERSION_MISMATCH) or left <= 0.1:
                raise
            if spawns_left <= 0:
                raise
            if spawn_engine(paths, replace=exc.code == ERR_VERSION_MISMATCH) is not None:
                spawns_left -= 1
        time.sleep(0.05)


def engine_status(paths: DataPaths, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """The running engine's status, or None if none answers."""
    try:
        return EngineClient(paths).status(timeout_s)
    except EngineRequestError:
        return None


def engine_probe(paths: DataPaths, timeout_s: float = 1.0) -> dict[str, Any]:
    """What ``memself engine status`` reports, never confusing "cannot answer" with "gone".

    ``{"running": True, **status}`` when the engine answered (``state`` is ready, loading or
    failed); otherwise ``state`` says why not: "busy" (every connection slot taken), "unresponsive"
    (connected, but no answer within ``timeout_s``: one long request holding it, or a stopped
    process), "starting" (holds the lock, not listening yet, or already exiting), each with
    ``running`` True and the lock holder's ``pid`` when known; or "stopped".
    """
    client = EngineClient(paths)
    try:
        return {"running": True, **client.status(timeout_s)}
    except EngineRequestError as exc:
        code = exc.code
    held = instance_lock.is_held(client.location.lock_path)
    if code == ERR_BUSY:
        state = "busy"
    elif code == ERR_TIMEOUT:
        state = "unresponsive"
    elif held:
        state = "starting"
    else:
        return {"running": False, "state": "stopped"}
    pid = instance_lock.read_owner(client.location.lock_path) if held else None
    return {"running": True, "state": state, "pid": pid, "error": code}


def stop_engine_quietly(paths: DataPaths, timeout_s: float = 5.0) -> int | None:
    """``stop_engine``, for a command that goes on either way: an engine that cannot be asked is
    left running (the caller's own step then says what went wrong)."""
    try:
        return stop_engine(paths, timeout_s)
    except (MemselfError, OSError):
        return None


def stop_engine(paths: DataPaths, timeout_s: float = 5.0) -> int | None:
    """Ask the engine to exit and wait until it has; its pid, or None if none was running.

    An engine that is there but cannot take the request (busy, not answering) raises."""
    client = EngineClient(paths)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid = client.request(OP_STOP, None, min(timeout_s, 2.0)).get("pid")
            break
        except EngineRequestError as exc:
            if exc.code in (ERR_BUSY, ERR_TIMEOUT):
                raise
            # Holding the lock without listening: an engine still starting. Left alone it would
            # serve (and outlive its data directory's user) for its whole idle time.
            starting = instance_lock.is_held(client.location.lock_path) or _still_starting(
                client.location.data_dir
            )
            if not starting or time.monotonic() > deadline:
                return None
            time.sleep(0.05)
    while instance_lock.is_held(client.location.lock_path):
        if time.monotonic() > deadline:
            raise EngineRequestError(ERR_TIMEOUT, "召回引擎没有按时退出")
        time.sleep(0.02)
    _reap()
    return pid if isinstance(pid, int) else None
