"""The engine process: one per data directory, holding whatever its service loaded, warm.

Lifecycle: take the single-instance lock (in the data directory), listen (Unix socket in a
private directory, whose path is recorded in the data directory, or loopback TCP with a token
where there are no Unix sockets), warm the service up in the background,
serve one request per connection on its own thread, and exit after ``idle_s`` without requests,
on ``stop``, on SIGTERM, or when a client of another version asks for a service op.

A service may leave work that depends on the reply reaching its reader (``take_deferred``: the
reward of a forwarded hook's recall): it runs only when the client acknowledges (``ACK``).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import memself
from memself import children
from memself.atomic import write_atomic
from memself.engine import instance_lock
from memself.engine.base import EngineService, watched_files
from memself.engine.location import (
    EngineLocation,
    code_fingerprint,
    dir_problem,
    ensure_private_dir,
    fallback_prefix,
    locate,
    make_fallback_dir,
    own_uid,
)
from memself.engine.protocol import (
    ACK,
    ACK_WAIT_S,
    ERR_BAD_REQUEST,
    ERR_BUSY,
    ERR_INTERNAL,
    ERR_NOT_READY,
    ERR_REFUSED,
    ERR_SERVICE,
    ERR_TOO_LARGE,
    ERR_VERSION_MISMATCH,
    ERR_WARM_UP_FAILED,
    HEADER_BYTES,
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    MESSAGES,
    OP_PING,
    OP_STATUS,
    OP_STOP,
    PROTOCOL_VERSION,
    FrameError,
    pack,
    read_body,
    read_header,
    recv_exact,
)
from memself.engine.transport import NONCE_BYTES, format_port_file, parse_port_file, tcp_proof
from memself.errors import MemselfError
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import signals as platform_signals
from memself.platform import sockets
from memself.platform.sockets import peer_allowed, peer_uid

STATE_LOADING = "loading"
STATE_READY = "ready"
STATE_FAILED = "failed"
# How long the group files must stay still after a change before memories.html is regenerated.
# A client that connects but does not send its request in this time loses its thread.
_READ_TIMEOUT_S = 5.0
_WRITE_TIMEOUT_S = 10.0
# The longest a service op may wait for warm-up, whatever the client asks.
_MAX_WAIT_READY_S = 120.0
# How long the exit waits for in-flight replies (the reply to "stop" among them).
_DRAIN_S = 2.0
# How long the accept loop waits for the request it answers "busy" (clients send at once).
_BUSY_READ_S = 0.05


def _error(code: str, message: str | None = None) -> dict[str, Any]:
    return {"ok": False, "error": code, "message": message or MESSAGES.get(code, code)}


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "result": result}


FileStamp = tuple[int, int, int] | None
Deferred = Callable[[], None] | None  # what runs once the client acknowledged the reply


def _stamp(path: Path) -> FileStamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


class EngineServer:
    """Serves one data directory. Use: ``acquire()`` -> ``start(service)`` -> ``serve_forever()``.

    ``transport`` is "unix" (default where Unix sockets exist) or "tcp"; ``allowed_uid`` is the only
    uid whose connections are served (default: ours). ``lock_wait_s`` bounds how long a new
    engine waits for an exiting one (version change) to release the lock; if a healthy engine of
    the same code answers meanwhile, ``acquire`` returns False at once.
    """

    def __init__(
        self,
        paths: DataPaths,
        *,
        idle_s: float,
        location: EngineLocation | None = None,
        transport: str | None = None,
        allowed_uid: int | None = None,
        max_connections: int = 32,
        lock_wait_s: float = 5.0,
        idle_tasks: Sequence[Callable[[float], None]] = (),
    ) -> None:
        self.paths = paths
        self.idle_s = idle_s
        self.location = location or locate(paths.root)
        self.transport = transport or ("unix" if sockets.unix_sockets() else "tcp")
        self.allowed_uid = allowed_uid if allowed_uid is not None else own_uid()
        self.version = memself.__version__
        self.fingerprint = code_fingerprint()
        self.lock_wait_s = lock_wait_s
        self.pid = os.getpid()
        self.address = ""
        self.stop_reason = ""
        # (the unsafe runtime directory, why) when the engine listens in a fallback directory.
        self.runtime_fallback: tuple[str, str] | None = None
        self._service: EngineService | None = None
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._bound_inode: int | None = None
        self._token = ""
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stop = threading.Event()
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._counter_lock = threading.Lock()
        self._active = 0
        self._requests = 0
        self._reloads = 0
        self._last_activity = time.monotonic()
        self._started_wall = time.time()
        self._state = STATE_LOADING
        self._warm_error = ""
        # Why the last reload after a data change failed ("" when it did not): the engine serves
        # what it loaded before, and says so instead of calling that "ready".
        self._reload_error = ""
        self._warm_seconds: float | None = None
        self._warm_done = threading.Event()
        # handle() and reload() never overlap; ping and status never take this lock.
        self._service_lock = threading.Lock()
        self._watched: list[Path] = watched_files(paths)
        self._stamps: list[FileStamp] = []
        # What the product runs between connections (the page regenerated after writes), each
        # given the monotonic clock; the engine knows nothing of what they do.
        self._idle_tasks = tuple(idle_tasks)

    # -- lifecycle ---------------------------------------------------------------------------

    def acquire(self, handed_fd: int | None = None) -> bool:
        """Take the single-instance lock; False if another engine serves this data directory.

        ``handed_fd``: the lock file, already locked by the client that spawned us.
        """
        os.makedirs(self.location.data_dir, mode=0o700, exist_ok=True)
        if handed_fd is not None:
            if instance_lock.holds(handed_fd, self.location.lock_path):
                os.set_inheritable(handed_fd, False)  # our own children must not keep the lock
                return self._locked(handed_fd)
            # Not our lock file (or not locked): leave that descriptor alone and lock normally.
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            fd = instance_lock.try_lock(self.location.lock_path)
            if fd is not None:
                return self._locked(fd)
            if self._same_engine_answers() or time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def _locked(self, fd: int) -> bool:
        self._lock_fd = fd
        instance_lock.write_owner(fd, self.pid)
        if self.transport == "unix":
            try:
                self._choose_runtime_dir()
            except BaseException:
                self.release()
                raise
        return True

    def _choose_runtime_dir(self) -> None:
        """Use the usual runtime directory, or a private one of our own when it is unsafe:
        refusing to run would switch recall off for good for this user."""
        wanted = self.location.runtime_dir
        try:
            ensure_private_dir(wanted)
            return
        except OSError as exc:
            reason = dir_problem(wanted) or (exc.strerror or str(exc))
        self.location = self.location.moved_to(make_fallback_dir(self.location))
        ensure_private_dir(self.location.runtime_dir)
        self.runtime_fallback = (wanted, reason)
        log(
            self.paths,
            "engine-runtime-fallback",
            unsafe=wanted,
            reason=reason,
            using=self.location.runtime_dir,
        )

    def _same_engine_answers(self) -> bool:
        from memself.engine.client import EngineClient, EngineRequestError

        try:
            client = EngineClient(self.paths, version=self.version, fingerprint=self.fingerprint)
            return client.matches(client.ping(timeout_s=0.3))
        except EngineRequestError:
            return False

    def start(self, service: EngineService) -> bool:
        """Listen and begin warming ``service`` up; False if another engine holds the lock."""
        if self._lock_fd is None and not self.acquire():
            return False
        self._service = service
        try:
            self._wake_r, self._wake_w = socket.socketpair()
            if self.transport == "unix":
                self._listen_unix()
            else:
                self._listen_tcp()
        except BaseException:
            self.release()
            raise
        watched = getattr(service, "watched_paths", None)
        if callable(watched):
            self._watched = [Path(path) for path in watched()]
        self._stamps = [_stamp(path) for path in self._watched]
        self._last_activity = time.monotonic()
        log(
            self.paths,
            "engine-start",
            pid=self.pid,
            transport=self.transport,
            address=self.address,
            version=self.version,
        )
        self._start_warm_up()
        return True

    def _listen_unix(self) -> None:
        path = self.location.socket_path
        # We hold the lock, so whatever socket file is there belongs to a dead engine.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(sockets.unix_family(), socket.SOCK_STREAM)
        try:
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(64)
        except BaseException:
            listener.close()
            raise
        listener.setblocking(False)
        self._bound_inode = os.stat(path).st_ino
        self._listener = listener
        self.address = path
        try:
            # Clients started with another runtime directory (or none usable) look here.
            write_atomic(Path(self.location.record_path), path + "\n", mode=0o600)
        except OSError as exc:  # they would only miss the engine, not reach a wrong one
            log(self.paths, "engine-record-failed", error=_describe_error(exc))

    def _listen_tcp(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            port = listener.getsockname()[1]
            self._token = secrets.token_urlsafe(32)
            self.paths.ensure()
            write_atomic(
                Path(self.location.port_file),
                format_port_file(port, self._token, self.pid),
            )
        except BaseException:
            listener.close()
            raise
        listener.setblocking(False)
        self._listener = listener
        self.address = f"127.0.0.1:{port}"

    def _start_warm_up(self) -> None:
        self._state = STATE_LOADING
        self._warm_error = ""
        self._warm_done.clear()
        threading.Thread(target=self._warm_up, name="engine-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        started = time.monotonic()
        try:
            assert self._service is not None
            self._service.warm_up()
        except Exception as exc:  # any failure must leave a serving, honest engine
            self._warm_error = _describe_error(exc)
            self._state = STATE_FAILED
            self._warm_done.set()
            log(self.paths, "engine-warm-up-failed", error=self._warm_error)
        else:
            self._warm_seconds = round(time.monotonic() - started, 3)
            # The event is set with the state, before the log line: a ping that reads "ready"
            # promises that the next request is served, and a slow disk must not break that.
            self._state = STATE_READY
            self._warm_done.set()
            log(self.paths, "engine-ready", warm_up_s=self._warm_seconds)

    def shutdown(self, reason: str = "stop") -> None:
        """Ask ``serve_forever`` to return (thread- and signal-safe)."""
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def serve_forever(self) -> None:
        """Accept connections until stopped or idle, then clean up (socket, port file, lock)."""
        assert self._listener is not None and self._wake_r is not None
        try:
            while not self._stop.is_set():
                children.reap()  # judges a forwarded prompt spawned; at most a second a zombie
                self._run_idle_tasks()
                if not self._socket_file_is_ours():
                    # Deleted (a /tmp cleaner, a logout emptying /run/user): nobody can reach us,
                    # and a successor cannot start while we hold the lock.
                    self.shutdown("socket-removed")
                    break
                now = time.monotonic()
                with self._counter_lock:
                    idle_for = now - self._last_activity if self._active == 0 else 0.0
                if idle_for >= self.idle_s:
                    self.shutdown("idle")
                    break
                timeout = min(1.0, max(0.02, self.idle_s - idle_for))
                readable, _, _ = select.select([self._listener, self._wake_r], [], [], timeout)
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(64)
                if self._listener in readable and not self._stop.is_set():
                    self._accept()
        finally:
            self._close()

    def _run_idle_tasks(self) -> None:
        for task in self._idle_tasks:
            try:
                task(time.monotonic())
            except Exception as exc:  # these are conveniences; serving is not
                log(self.paths, "idle-task-failed", error=_where(exc))

    def _socket_file_is_ours(self) -> bool:
        if self.transport != "unix":
            return True
        try:
            return os.lstat(self.location.socket_path).st_ino == self._bound_inode
        except OSError:
            return False

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        with self._counter_lock:
            self._last_activity = time.monotonic()
        if not self._slots.acquire(blocking=False):
            # Read the request first: closing a Unix socket with unread data resets it, and the
            # client would report "not running" instead of "busy". On TCP the client waits for
            # our proof before it sends the request.
            if self.transport != "tcp" or self._prove(conn, _BUSY_READ_S):
                _discard_request(conn, _BUSY_READ_S)
            _send(conn, _error(ERR_BUSY), timeout=0.2)
            conn.close()
            return
        with self._counter_lock:
            self._active += 1
        threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()

    def _close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self.transport == "unix" and self._bound_inode is not None:
            with contextlib.suppress(OSError):
                if os.lstat(self.location.socket_path).st_ino == self._bound_inode:
                    os.unlink(self.location.socket_path)
            # Still under our lock: a successor writes its record only after it takes the lock.
            self._remove_record()
        if self.transport == "tcp" and self._token:
            self._remove_port_file()
        # New clients already see "unreachable" and may spawn a successor, which waits for the
        # lock; let in-flight replies (the answer to "stop" among them) go out first.
        deadline = time.monotonic() + _DRAIN_S
        while time.monotonic() < deadline:
            with self._counter_lock:
                if self._active == 0:
                    break
            time.sleep(0.01)
        close = getattr(self._service, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
        log(
            self.paths,
            "engine-exit",
            pid=self.pid,
            reason=self.stop_reason or "unknown",
            requests=self._requests,
        )
        self.release()
        for end in (self._wake_r, self._wake_w):
            if end is not None:
                end.close()

    def _remove_record(self) -> None:
        try:
            with open(self.location.record_path, encoding="utf-8") as handle:
                ours = handle.read(4096).strip() == self.location.socket_path
            if ours:
                os.unlink(self.location.record_path)
        except OSError:
            pass
        if self.runtime_fallback is not None and os.path.basename(self.location.runtime_dir).startswith(
            fallback_prefix()
        ):
            with contextlib.suppress(OSError):
                os.rmdir(self.location.runtime_dir)  # ours, and empty unless someone added files

    def _remove_port_file(self) -> None:
        try:
            with open(self.location.port_file, encoding="utf-8") as handle:
                if parse_port_file(handle.read(4096))[1] == self._token:
                    os.unlink(self.location.port_file)
        except (OSError, ValueError, AttributeError):
            pass

    def release(self) -> None:
        """Drop the single-instance lock (``serve_forever`` does it on exit)."""
        if self._lock_fd is not None:
            instance_lock.release(self._lock_fd)
            self._lock_fd = None

    # -- one connection ------------------------------------------------------------------------

    def _prove(self, conn: socket.socket, timeout: float) -> bool:
        """TCP: answer the client's nonce with the proof that we hold the token
        (``transport.tcp_proof``), before it sends anything; False when that failed."""
        try:
            conn.settimeout(timeout)
            nonce = recv_exact(conn, NONCE_BYTES)
            conn.sendall(tcp_proof(self._token, nonce))
        except OSError:
            return False
        return True

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(_READ_TIMEOUT_S)
            if self.transport == "tcp" and not self._prove(conn, _READ_TIMEOUT_S):
                return
            # Read the (bounded) request before any refusal: closing a Unix socket with unread
            # data resets it, and the client would see "unreachable" instead of the reason.
            try:
                request = read_body(conn, read_header(conn, MAX_REQUEST_BYTES))
            except FrameError as exc:
                code = ERR_TOO_LARGE if exc.code == ERR_TOO_LARGE else ERR_BAD_REQUEST
                _send(conn, _error(code))
                return
            except OSError:
                return
            if self.transport == "unix":
                uid = peer_uid(conn)
                if not peer_allowed(uid, self.allowed_uid):
                    log(self.paths, "engine-refused", peer_uid=uid)
                    _send(conn, _error(ERR_REFUSED))
                    return
            response, deferred = self._dispatch(request)
            if _send(conn, response) and deferred is not None and _acknowledged(conn):
                self._run_deferred(deferred)
        except Exception as exc:  # a broken request must not kill the engine
            log(self.paths, "engine-connection-error", error=_where(exc))
        finally:
            conn.close()
            with self._counter_lock:
                self._active -= 1
                self._requests += 1
                self._last_activity = time.monotonic()
            self._slots.release()

    def _dispatch(self, request: dict[str, Any]) -> tuple[dict[str, Any], Deferred]:
        op = request.get("op")
        payload = request.get("payload", {})
        if not isinstance(op, str) or not isinstance(payload, dict):
            return _error(ERR_BAD_REQUEST), None
        if self.transport == "tcp" and not hmac.compare_digest(
            str(request.get("token", "")).encode(), self._token.encode()
        ):
            log(self.paths, "engine-refused", reason="bad-token")
            return _error(ERR_REFUSED), None
        if op == OP_PING:
            return _ok(self.ping_info()), None
        if op == OP_STATUS:
            return _ok(self.status_info()), None
        if op == OP_STOP:
            self.shutdown("stop")
            return _ok({"stopping": True, "pid": self.pid}), None
        if (
            request.get("v") != PROTOCOL_VERSION
            or request.get("version") != self.version
            or request.get("fingerprint") != self.fingerprint
        ):
            log(
                self.paths,
                "engine-version-mismatch",
                ours=self.fingerprint,
                theirs=str(request.get("fingerprint"))[:80],
            )
            self.shutdown("version-mismatch")
            return _error(ERR_VERSION_MISMATCH), None
        return self._service_op(op, payload, request.get("wait_s", 0))

    def _service_op(self, op: str, payload: dict[str, Any], wait_s: Any) -> tuple[dict[str, Any], Deferred]:
        if self._state == STATE_FAILED:
            self._check_files()  # a fixed config or index gets a second warm-up
        try:
            wait = min(max(float(wait_s), 0.0), _MAX_WAIT_READY_S)
        except (TypeError, ValueError):
            wait = 0.0
        if not self._warm_done.wait(wait):
            return _error(ERR_NOT_READY), None
        if self._state == STATE_FAILED:
            return _error(ERR_WARM_UP_FAILED, f"{MESSAGES[ERR_WARM_UP_FAILED]}：{self._warm_error}"), None
        self._check_files()
        service = self._service
        assert service is not None
        take_deferred = getattr(service, "take_deferred", None)
        with self._service_lock:
            try:
                result = service.handle(op, payload)
            except MemselfError as exc:
                return _error(ERR_SERVICE, str(exc) or None), None
            except Exception as exc:  # report, keep serving
                log(self.paths, "engine-service-error", op=op[:40], error=_where(exc))
                return _error(ERR_INTERNAL), None
            finally:
                # Taken under the lock it was left under: it belongs to this op alone.
                deferred = take_deferred() if callable(take_deferred) else None
        if not isinstance(result, dict):
            log(self.paths, "engine-service-error", op=op[:40], error="result is not a dict")
            return _error(ERR_INTERNAL), None
        return _ok(result), deferred

    def _run_deferred(self, deferred: Callable[[], None]) -> None:
        with self._service_lock:
            try:
                deferred()
            except Exception as exc:  # a failed reward must not end the engine
                log(self.paths, "engine-deferred-error", error=_where(exc))

    def _check_files(self) -> None:
        """Reload the service when a watched data file changed since the last look."""
        if [_stamp(path) for path in self._watched] == self._stamps:
            return
        with self._service_lock:
            stamps = [_stamp(path) for path in self._watched]
            if stamps == self._stamps:
                return
            self._stamps = stamps
            if self._state == STATE_FAILED:
                log(self.paths, "engine-warm-up-retry")
                self._start_warm_up()
                return
            if self._state != STATE_READY:
                return
            assert self._service is not None
            try:
                self._service.reload()
            except Exception as exc:  # stale data beats no engine
                log(self.paths, "engine-reload-failed", error=_where(exc))
                # A MemselfError's message is written for the user; another's might quote data.
                self._reload_error = str(exc)[:300] if isinstance(exc, MemselfError) else _where(exc)
            else:
                self._reloads += 1
                self._reload_error = ""

    # -- answers of the engine's own ops -------------------------------------------------------

    def ping_info(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "fingerprint": self.fingerprint,
            "pid": self.pid,
            "ready": self._state == STATE_READY,
            "state": self._state,
        }

    def status_info(self) -> dict[str, Any]:
        now = time.monotonic()
        with self._counter_lock:
            idle_for = now - self._last_activity
            requests = self._requests
        info = self.ping_info()
        info.update(
            {
                "transport": self.transport,
                "address": self.address,
                "data_dir": str(self.paths.root),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self._started_wall)),
                "uptime_s": round(time.time() - self._started_wall, 1),
                "idle_s": round(idle_for, 1),
                "idle_limit_s": self.idle_s,
                "requests": requests,
                "reloads": self._reloads,
                "warm_up_s": self._warm_seconds,
                "error": self._warm_error or None,
                "reload_error": self._reload_error or None,
                "service": self._describe_service(),
            }
        )
        if self.runtime_fallback is not None:
            info["runtime_fallback"] = {
                "unsafe": self.runtime_fallback[0],
                "reason": self.runtime_fallback[1],
                "using": self.location.runtime_dir,
            }
        return info

    def _describe_service(self) -> dict[str, Any]:
        describe = getattr(self._service, "describe", None)
        if not callable(describe) or self._state != STATE_READY:
            return {}
        # Never make status wait behind a long request; what needs no lock is still told.
        if not self._service_lock.acquire(timeout=0.05):
            return {"busy": True, **self._service_progress()}
        try:
            result = describe()
            return result if isinstance(result, dict) else {}
        except Exception:
            return {}
        finally:
            self._service_lock.release()

    def _service_progress(self) -> dict[str, Any]:
        progress = getattr(self._service, "progress", None)
        if not callable(progress):
            return {}
        try:
            result = progress()
            return result if isinstance(result, dict) else {}
        except Exception:
            return {}


def _send(conn: socket.socket, response: dict[str, Any], timeout: float = _WRITE_TIMEOUT_S) -> bool:
    """Send one reply; False when it could not go out whole (a failed one is sent as an error)."""
    ok = True
    try:
        frame = pack(response, MAX_RESPONSE_BYTES)
    except FrameError:
        frame, ok = pack(_error(ERR_TOO_LARGE, "应答超过大小上限"), MAX_RESPONSE_BYTES), False
    except (TypeError, ValueError):
        frame, ok = pack(_error(ERR_INTERNAL), MAX_RESPONSE_BYTES), False
    try:
        conn.settimeout(timeout)
        conn.sendall(frame)
    except OSError:
        return False  # the client gave up (its budget ran out); nothing to tell it
    return ok


def _acknowledged(conn: socket.socket) -> bool:
    """Whether the client says it handed the reply on (one ``ACK`` byte within ``ACK_WAIT_S``);
    a client that closed, timed out or sent anything else did not."""
    try:
        conn.settimeout(ACK_WAIT_S)
        return conn.recv(1) == ACK
    except OSError:
        return False


def _discard_request(conn: socket.socket, timeout: float) -> None:
    """Read and drop one request frame (bounded in size and time), without parsing it."""
    deadline = time.monotonic() + timeout
    try:
        header = b""
        while len(header) < HEADER_BYTES:
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = conn.recv(HEADER_BYTES - len(header))
            if not chunk:
                return
            header += chunk
        left = int.from_bytes(header, "big")
        if left > MAX_REQUEST_BYTES:
            return
        while left:
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = conn.recv(min(left, 1 << 16))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:
        return


def _describe_error(exc: BaseException) -> str:
    """Type and a short message, for failures that involve no user text (start-up, warm-up):
    ``engine status`` shows it to the user."""
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _where(exc: BaseException) -> str:
    """Type and the innermost source line, never the message: errors raised while handling a
    request may quote the prompt, and prompts must not reach the log."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return type(exc).__name__
    code = frame.tb_frame.f_code
    return f"{type(exc).__name__} at {os.path.basename(code.co_filename)}:{frame.tb_lineno}"


def run_engine(
    paths: DataPaths,
    service_spec: str,
    idle_minutes: float | None = None,
    lock_fd: int | None = None,
    idle_tasks: Sequence[Callable[[float], None]] = (),
) -> int:
    """The engine process's main: serve ``paths`` until idle or stopped. Returns an exit code.

    ``lock_fd``: the single-instance lock handed over by the spawning client (``--lock-fd``).
    """
    from memself.engine.base import load_service
    from memself.engine.heap import limit_arenas

    os.umask(0o077)
    limit_arenas()  # before any thread: the warm-up's, the connections', onnxruntime's
    children.reap_here()
    # posix_spawn leaves us in the hook's working directory; do not pin the user's project.
    with contextlib.suppress(OSError):
        os.chdir(os.path.abspath(os.sep))
    if idle_minutes is None:
        from memself.config import load_config

        idle_minutes = float(load_config(paths).engineIdleMinutes)
    server = EngineServer(paths, idle_s=max(idle_minutes, 0.0) * 60.0, idle_tasks=idle_tasks)
    try:
        if not server.acquire(lock_fd):
            log(paths, "engine-already-running")
            return 0
    except OSError as exc:
        log(paths, "engine-start-failed", error=_describe_error(exc))
        return 1
    try:
        service = load_service(paths, service_spec)
        started = server.start(service)
    except Exception as exc:  # logged; the client falls back and retries later
        log(paths, "engine-start-failed", error=_describe_error(exc))
        server.release()
        return 1
    if not started:
        return 0
    if threading.current_thread() is threading.main_thread():
        for name in platform_signals.shutdown_signal_names():
            signum = getattr(signal, name, None)
            if signum is not None:
                signal.signal(signum, lambda *_: server.shutdown("signal"))
    server.serve_forever()
    return 0
