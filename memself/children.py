"""Child processes a long-lived process must wait for.

An exited child stays a zombie until its parent waits for it. A hook process exits right after
it spawns a judge, so init adopts the judge and waits for it; the warm engine runs the same
hook code (a forwarded prompt spawns the judge from inside the engine) and lives for hours, so
it must wait for its judges itself. Only pids registered here are waited for: other children
(a ``subprocess`` a library started) belong to whoever started them.

Standard library only: the hook path imports this module.
"""

from __future__ import annotations

# pid -> None; a dict keeps insertion order and its updates are atomic under the GIL, so the
# engine's connection threads may register while its serve loop reaps.
_PENDING: dict[int, None] = {}
_enabled = False


def reap_here() -> None:
    """Declare this process a reaper (the engine does, at start): from now on spawned children
    are registered and ``reap`` waits for them. Elsewhere registering is a no-op, so nobody
    waits for a pid that a test or a caller already waited for (and the kernel reused)."""
    global _enabled
    _enabled = True


def track(pid: int) -> None:
    """Register a child this process spawned and will not wait for otherwise."""
    if _enabled:
        _PENDING[pid] = None


def reap() -> int:
    """Wait, without blocking, for every registered child that has exited; how many still run."""
    from memself.platform import children

    for pid in tuple(_PENDING):
        try:
            done = children.reap(pid)
        except OSError:
            continue
        if done:
            _PENDING.pop(pid, None)
    return len(_PENDING)
