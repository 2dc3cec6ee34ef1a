"""Detached children: a process that outlives the one that started it, with no terminal and,
on Windows, no console window flashing up.

POSIX: a new session (``setsid``), so the host's terminal signals and process-group kills do not
reach it. Windows: ``DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW``. In the
foreign-platform mode on Linux the child keeps our session, since Linux refuses Windows' flags
and a new session is what Windows does not have.

Standard library only: the hook spawns the judge and the engine.
"""

from __future__ import annotations

import os

from memself.platform import system

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The values of subprocess's constants of these names (defined there on Windows only).
DETACHED_PROCESS = 0x00000008
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
WINDOWS_DETACH_FLAGS = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW


def posix_spawn_detached() -> bool:
    """True where ``os.posix_spawn(..., setsid=True)`` starts a detached child (vfork
    underneath: about a millisecond, where ``subprocess`` costs the hook tens of milliseconds to
    import); elsewhere use ``popen_detached``'s arguments."""
    return hasattr(os, "posix_spawn") and not system.windows()


def popen_detached() -> dict[str, Any]:
    """Keyword arguments that make ``subprocess.Popen`` start a detached child here."""
    if not system.windows():
        return {"start_new_session": True}
    if system.real_windows():
        return {"creationflags": WINDOWS_DETACH_FLAGS}
    return {}


# Children started through subprocess (where posix_spawn is not used), by pid: waited through
# their Popen objects, since Windows' waitpid takes a process handle, not a pid.
_POPENS: dict[int, Any] = {}


def spawn_detached(argv: list[str], env: dict[str, str]) -> int:
    """Start ``argv`` detached, stdio on the null device; its pid (``reap`` waits for it)."""
    if posix_spawn_detached():
        actions: list[tuple[Any, ...]] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
    return adopt(popen_detached_child(argv, env))


def popen_detached_child(
    argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = (), cwd: str | None = None
) -> Any:
    """``subprocess.Popen`` of a detached child, stdio on the null device, only ``pass_fds``
    inherited; the Popen object (the caller adopts it or waits through it)."""
    import subprocess

    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        cwd=cwd,
        env=env,
        pass_fds=pass_fds,
        **popen_detached(),
    )


def adopt(process: Any) -> int:
    """Remember a ``subprocess.Popen`` child so that ``reap`` can wait for it; its pid."""
    _POPENS[process.pid] = process
    pid: int = process.pid
    return pid


def reap(pid: int) -> bool:
    """Wait, without blocking, for a child this process started; True once it has exited (or is
    not ours to wait for)."""
    process = _POPENS.get(pid)
    if process is not None:
        if process.poll() is None:
            return False
        del _POPENS[pid]
        return True
    if system.windows():
        return True  # not started here: nothing to wait for
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours any more (or already waited for)
        return True
    return bool(done)


def popen_own_group() -> dict[str, Any]:
    """Keyword arguments that start a ``subprocess.Popen`` child in a process group of its own,
    still writing to this terminal, so that ``end_group`` ends it and whatever it started.

    On Windows a console program started by a process without a console (the detached engine)
    gets a new, visible console window: there it is started without one."""
    if not system.windows():
        return {"start_new_session": True}
    if system.real_windows():
        return {"creationflags": CREATE_NEW_PROCESS_GROUP | (0 if _has_console() else CREATE_NO_WINDOW)}
    return {}


def piped() -> dict[str, Any]:
    """Keyword arguments for a console program whose output we capture (git): no console window
    flashes up on Windows when a detached process (the background sync) runs it."""
    return {"creationflags": CREATE_NO_WINDOW} if system.real_windows() else {}


def _has_console() -> bool:  # pragma: no cover - Windows only
    import ctypes

    return bool(getattr(ctypes, "windll").kernel32.GetConsoleWindow())  # noqa: B009 - absent from stubs here


def end_group(process: Any, force: bool) -> None:
    """Ask a child started with ``popen_own_group`` and its group to stop (SIGTERM), or kill them
    (``force``). Windows has no signals to a group: there the child alone is terminated."""
    import contextlib
    import signal

    with contextlib.suppress(OSError):
        if system.windows():
            process.kill() if force else process.terminate()
            return
        os.killpg(process.pid, signal.SIGKILL if force else signal.SIGTERM)
