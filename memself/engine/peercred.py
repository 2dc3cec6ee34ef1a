"""Who is on the other end of a Unix socket: the peer's uid, read from the kernel.

Both sides check it: the engine refuses other users' clients, and the client refuses an engine
run by someone else. Standard library only (``_socket``, not ``socket``: see protocol.py).
"""

from __future__ import annotations

import _socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket

# macOS: getsockopt(SOL_LOCAL=0, LOCAL_PEERCRED=1) returns struct xucred
# {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]}.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 1
_XUCRED_SIZE = 76


def peer_uid(sock: socket) -> int | None:
    """The uid of the process at the other end of a connected AF_UNIX socket.

    None where the platform cannot tell; the 0700 runtime directory is then the only guard.
    """
    so_peercred = getattr(_socket, "SO_PEERCRED", None)
    if so_peercred is not None:
        # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
        data = sock.getsockopt(_socket.SOL_SOCKET, so_peercred, 12)
        return int.from_bytes(data[4:8], sys.byteorder)
    if sys.platform == "darwin":
        data = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
        return int.from_bytes(data[4:8], sys.byteorder)
    return None


def peer_allowed(peer: int | None, own: int | None) -> bool:
    """Only our own uid may talk to us; an unknown peer is allowed when the platform has no uids
    or cannot report them (the private directory guards those)."""
    if peer is None or own is None:
        return True
    return peer == own
