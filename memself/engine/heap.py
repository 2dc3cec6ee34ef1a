"""The engine process's C heap: a fixed, small number of malloc arenas.

The engine serves each connection on a thread of its own, and glibc gives a thread that
allocates an arena of its own while there are fewer than eight per core. Every arena keeps
what its threads freed for reuse, so the engine's resident size climbed with each new
connection thread until all of them existed, each holding its share of request buffers.
Requests are served one at a time (the service's lock), so two arenas cost nothing in speed.
Must run before the process starts threads: arenas that exist stay.
"""

from __future__ import annotations

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's arenas at ``count``; False where that is not glibc (nothing to cap)."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, count))
    except (OSError, AttributeError):
        return False
