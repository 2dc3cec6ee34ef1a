"""The engine's transport and who is on the other end.

Unix sockets where the system has them (a socket file in a private folder, and the peer's uid
from the kernel: ``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS, the call behind
``getpeereid``); loopback TCP elsewhere, where a random token in a private port file stands in
for the uid. Standard library only, and ``_socket`` rather than ``socket`` (which pulls in
selectors and enum): the hook connects on every prompt.
"""

import _socket
import sys

from memself.platform import system

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket

# macOS: getsockopt(SOL_LOCAL=0, LOCAL_PEERCRED=1) returns struct xucred
# {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]}.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 1
_XUCRED_SIZE = 76


def unix_sockets() -> bool:
    """True where the engine listens on a Unix socket; False means loopback TCP with a token."""
    return hasattr(_socket, "AF_UNIX") and not system.windows()


def unix_family() -> int:
    family: int = getattr(_socket, "AF_UNIX")  # noqa: B009 - absent on Windows' type stubs
    return family


def peer_uid(sock: "socket") -> int | None:
    """The uid of the process at the other end of a connected Unix socket.

    None where the system cannot tell; the 0700 runtime directory is then the only guard.
    """
    so_peercred = getattr(_socket, "SO_PEERCRED", None)
    if so_peercred is not None and not system.windows():
        # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
        data = sock.getsockopt(_socket.SOL_SOCKET, so_peercred, 12)
        return int.from_bytes(data[4:8], sys.byteorder)
    if system.macos():
        data = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
        return int.from_bytes(data[4:8], sys.byteorder)
    return None


def peer_allowed(peer: int | None, own: int | None) -> bool:
    """Only our own uid may talk to us; an unknown peer is allowed when the system has no uids
    or cannot report them (the private directory guards those)."""
    if peer is None or own is None:
        return True
    return peer == own
