"""One request and its reply between a client and the engine: connect, check who answers, frame.

Both clients use it: the full one (``memself.engine.client``: CLI, MCP server, judge, the local
hook's recall) and the hook process's fast one (``memself.hook.process``), which builds its
request body by hand. The engine listens on a Unix socket in a private runtime directory (or
where it recorded it listens); where there are no Unix sockets, on loopback TCP with a token
from a 0600 port file. On a Unix socket the peer's uid must be ours.

Standard library only and cheap to import: ``_socket`` (``socket`` pulls in selectors and enum),
``json`` only to read the TCP fallback's port file. Every failure is a ``FrameError`` with an
ERR_* code of ``protocol``.
"""

from __future__ import annotations

import _socket
import os
import time

from memself.engine.location import dir_state, own_uid, recorded_socket
from memself.engine.peercred import peer_allowed, peer_uid
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memself.engine.location import EngineLocation


def connect(location: EngineLocation, deadline: float) -> tuple[_socket.socket, str | None]:
    """A connection to the engine of ``location`` and, on the TCP fallback, the token its
    requests must carry. ``deadline`` is a ``time.monotonic()`` instant."""
    if hasattr(_socket, "AF_UNIX"):
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
    sock = _connected(_socket.AF_UNIX, path, deadline, absent_ok=True)
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


def _connect_tcp(port_file: str, deadline: float) -> tuple[_socket.socket, str | None]:
    """The fallback where AF_UNIX is missing: loopback TCP plus the token from a 0600 file."""
    try:
        info = os.stat(port_file)
        if own_uid() is not None and (info.st_mode & 0o077 or info.st_uid != own_uid()):
            raise FrameError(ERR_UNSAFE_DIR, message=f"{MESSAGES[ERR_UNSAFE_DIR]}：{port_file}")
        import json

        with open(port_file, encoding="utf-8") as handle:
            data = json.load(handle)
        port, token = int(data["port"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError):
        raise FrameError(ERR_UNREACHABLE) from None
    sock = _connected(_socket.AF_INET, ("127.0.0.1", port), deadline)
    assert sock is not None  # only absent_ok returns None
    return sock, token
