"""One request and its reply between a client and the engine: connect, check who answers, frame.

Both clients use it: the full one (``memself.engine.client``: CLI, MCP server, judge, the local
hook's recall) and the hook process's fast one (``memself.hook.process``), which builds its
request body by hand. The engine listens on a Unix socket in a private runtime directory (or
where it recorded it listens); where there are no Unix sockets, on loopback TCP with a token
from a 0600 port file. On a Unix socket the peer's uid must be ours; on TCP the engine first
proves it knows the token (``tcp_proof`` of a fresh nonce), so a program that took the port of
a dead engine is refused before it sees any request.

Standard library only and cheap to import: ``_socket`` (``socket`` pulls in selectors and enum);
the TCP fallback's port file is plain lines and its proof a keyed BLAKE2b from the built-in
``_blake2`` (``json`` and ``hmac`` would cost the hook tens of milliseconds). Every failure is a
``FrameError`` with an ERR_* code of ``protocol``.
"""

import _socket
import os
import time

from memself.engine.location import dir_state, own_uid, recorded_socket
from memself.engine.protocol import (
    ERR_REFUSED,
    ERR_TIMEOUT,
    ERR_UNREACHABLE,
    ERR_UNSAFE_DIR,
    HEADER_BYTES,
    MAX_RESPONSE_BYTES,
    MESSAGES,
    FrameError,
    read_header,
    recv_exact,
)
from memself.platform import files, processes, sockets
from memself.platform.sockets import peer_allowed, peer_uid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memself.engine.location import EngineLocation


def connect(location: "EngineLocation", deadline: float) -> tuple[_socket.socket, str | None]:
    """A connection to the engine of ``location`` and, on the TCP fallback, the token its
    requests must carry. ``deadline`` is a ``time.monotonic()`` instant."""
    if sockets.unix_sockets():
        state = dir_state(location.runtime_dir)
        if state == "private":
            sock = _connect_unix(location.socket_path, deadline)
            if sock is not None:
                return sock, None
        # Not where we look first: an engine started with another runtime directory, or in its
        # own private one because ours is unsafe, recorded where it listens.
        recorded = recorded_socket(location)
        if recorded is not None:
            sock = _connect_unix(recorded, deadline)
            if sock is not None:
                return sock, None
        if state == "unsafe":
            raise FrameError(ERR_UNSAFE_DIR, message=f"{MESSAGES[ERR_UNSAFE_DIR]}：{location.runtime_dir}")
    return _connect_tcp(location.port_file, deadline)


def exchange(sock: _socket.socket, body: bytes, deadline: float, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """Send one request body, framed, and return the reply's body, unparsed; the whole exchange
    ends by ``deadline``."""
    try:
        sock.settimeout(remaining(deadline))
        sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)
        return recv_exact(sock, read_header(sock, limit, deadline), deadline)
    except TimeoutError:
        raise FrameError(ERR_TIMEOUT) from None
    except OSError:
        # Reset or broken pipe: the engine died (or exited) during this request.
        raise FrameError(ERR_UNREACHABLE) from None


def remaining(deadline: float) -> float:
    """Seconds left until ``deadline``; FrameError(timeout) when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise FrameError(ERR_TIMEOUT)
    return left


def _connect_unix(path: str, deadline: float) -> _socket.socket | None:
    """A connection to the engine at ``path``; None when nobody listens there."""
    sock = _connected(sockets.unix_family(), path, deadline, absent_ok=True)
    if sock is not None and not peer_allowed(peer_uid(sock), own_uid()):
        sock.close()
        raise FrameError(ERR_REFUSED)
    return sock


def _connected(
    family: int, address: str | tuple[str, int], deadline: float, absent_ok: bool = False
) -> _socket.socket | None:
    """A socket of ``family`` connected to ``address`` within the deadline, every failure a
    ``FrameError``; with ``absent_ok``, None when nobody listens there (no engine, or a stale
    socket file of a crashed one)."""
    try:
        sock = _socket.socket(family, _socket.SOCK_STREAM)
    except OSError:  # out of descriptors, say
        raise FrameError(ERR_UNREACHABLE) from None
    try:
        sock.settimeout(remaining(deadline))
        sock.connect(address)
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        if absent_ok:
            return None
        raise FrameError(ERR_UNREACHABLE) from None
    except TimeoutError:
        sock.close()
        raise FrameError(ERR_TIMEOUT) from None
    except OSError:
        sock.close()
        raise FrameError(ERR_UNREACHABLE) from None
    except BaseException:
        sock.close()
        raise


NONCE_BYTES = 16
PROOF_BYTES = 32


def tcp_proof(token: str, nonce: bytes) -> bytes:
    """What an engine answers to a client's nonce on TCP: BLAKE2b of the nonce keyed by the token."""
    from _blake2 import blake2b

    return blake2b(nonce, key=token.encode("utf-8")[:64], digest_size=PROOF_BYTES).digest()


def same_bytes(a: bytes, b: bytes) -> bool:
    """Constant-time comparison (``hmac.compare_digest``, without importing hmac)."""
    from _operator import _compare_digest

    return bool(_compare_digest(a, b))


def format_port_file(port: int, token: str, pid: int) -> str:
    """The TCP fallback's port file: port, token and the engine's pid, one a line."""
    return f"{port}\n{token}\n{pid}\n"


def parse_port_file(text: str) -> tuple[int, str, int]:
    """``(port, token, pid)`` of a port file; ValueError when it is not one."""
    lines = text.split("\n")
    if len(lines) < 3 or not lines[1]:
        raise ValueError("not a port file")
    return int(lines[0]), lines[1], int(lines[2])


def port_file_problem(port_file: str) -> str:
    """Why the TCP fallback's port file must not be believed, in words for the user; "" if it may.

    Whoever can read it can talk to the engine as us; whoever can write it can send our prompts
    elsewhere."""
    try:
        info = os.lstat(port_file)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"无法读取：{exc.strerror or exc}"
    problem = files.private_problem(info)
    return f"{port_file} {problem}" if problem else ""


def _connect_tcp(port_file: str, deadline: float) -> tuple[_socket.socket, str | None]:
    """The fallback without Unix sockets: loopback TCP plus the token from a private file."""
    problem = port_file_problem(port_file)
    if problem:
        raise FrameError(ERR_UNSAFE_DIR, message=f"{MESSAGES[ERR_UNSAFE_DIR]}：{problem}")
    try:
        with open(port_file, encoding="utf-8") as handle:
            port, token, pid = parse_port_file(handle.read(4096))
    except (OSError, ValueError):
        raise FrameError(ERR_UNREACHABLE) from None
    if not processes.pid_alive(pid):
        # A port file that outlived its engine (a crash, a shutdown): Windows takes about two
        # seconds to refuse a connection to a closed loopback port, a hook's whole budget, and a
        # timeout would not start a new engine the way "unreachable" does.
        raise FrameError(ERR_UNREACHABLE)
    sock = _connected(_socket.AF_INET, ("127.0.0.1", port), deadline)
    assert sock is not None  # only absent_ok returns None
    try:
        nonce = os.urandom(NONCE_BYTES)
        sock.settimeout(remaining(deadline))
        sock.sendall(nonce)
        proof = recv_exact(sock, PROOF_BYTES, deadline)
    except FrameError as exc:
        sock.close()
        if exc.code == ERR_TIMEOUT:
            raise
        raise FrameError(ERR_UNREACHABLE, message=_foreign_port(port)) from None
    except TimeoutError:  # an engine that does not answer (stopped, or swamped)
        sock.close()
        raise FrameError(ERR_TIMEOUT) from None
    except OSError:
        sock.close()
        raise FrameError(ERR_UNREACHABLE, message=_foreign_port(port)) from None
    if not same_bytes(proof, tcp_proof(token, nonce)):
        sock.close()
        raise FrameError(ERR_UNREACHABLE, message=_foreign_port(port))
    return sock, token


def _foreign_port(port: int) -> str:
    # Our engine is gone (its port file outlived it): "unreachable", so a new one is started,
    # which listens on a port of its own.
    return (
        f"本机端口 {port} 上应答的不是本用户的 memself 召回引擎（端口可能被别的程序占用了），"
        "没有向它发送任何内容；新启动的召回引擎会换用别的端口（memself engine start）"
    )
