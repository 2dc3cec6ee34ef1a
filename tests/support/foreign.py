"""The foreign-platform mode of the test suite: Windows' rules on this Linux machine.

``MEMSELF_FOREIGN_PLATFORM=1`` (or ``pytest --foreign-platform``) makes ``memself.platform``
take its Windows branches, in the test process and in every process the tests start, which
inherit the variable. In the test process the POSIX-only facilities are also taken away, so
that a module that still reached for one fails here instead of on a user's Windows machine:
memself's modules outside the platform layer cannot import ``fcntl`` (libraries that test the
system themselves keep it), and ``os.fork``, ``os.setsid``, ``os.posix_spawn``,
``os.pread``/``pwrite``, ``SO_PEERCRED`` and the alarm signal are gone. Children get a home path
with a space and Chinese characters (the fixture in conftest) and a GBK console
(``PYTHONIOENCODING=gbk``): whatever a host reads from memself must still be UTF-8.
"""

from __future__ import annotations

import os

from memself.platform.system import FOREIGN_ENV

OPTION = "--foreign-platform"
HOME_PARENT = "张 三"
_OS_HIDDEN = ("fork", "forkpty", "setsid", "setpgid", "posix_spawn", "posix_spawnp", "pread", "pwrite")
_SIGNALS_HIDDEN = ("SIGALRM", "SIGHUP", "SIGUSR1", "SIGUSR2", "setitimer", "alarm", "pause")


def active() -> bool:
    return os.environ.get(FOREIGN_ENV, "") == "1"


def enable() -> None:
    """Switch this process (and, through the environment, its children) to the foreign mode."""
    os.environ[FOREIGN_ENV] = "1"
    os.environ["PYTHONIOENCODING"] = "gbk"
    # The emulation of msvcrt's byte-range locks needs fcntl itself: loaded before it is hidden.
    import _signal
    import signal
    import socket
    import subprocess

    import memself.platform.msvcrt_emulation  # noqa: F401

    _refuse_posix_imports()
    _console_text_is_gbk(subprocess)
    for name in _OS_HIDDEN:
        if hasattr(os, name):
            delattr(os, name)
    # subprocess chose posix_spawn at import for some calls; the interpreter's fork_exec stays,
    # as CreateProcess does on Windows.
    subprocess._USE_POSIX_SPAWN = False  # type: ignore[attr-defined]
    for module in (socket, _socket_module()):
        if hasattr(module, "SO_PEERCRED"):
            delattr(module, "SO_PEERCRED")
    for module in (signal, _signal):
        for name in _SIGNALS_HIDDEN:
            if hasattr(module, name):
                delattr(module, name)


def _console_text_is_gbk(subprocess: object) -> None:
    """A test reading a Python child's output as text reads it as a Windows host would: in the
    console's code page (Python on Windows decodes a child's text pipes with the locale's
    encoding, and the child writes in it)."""
    popen = subprocess.Popen  # type: ignore[attr-defined]
    real_init = popen.__init__

    def init(self: object, *args: object, **kwargs: object) -> None:
        if (kwargs.get("text") or kwargs.get("universal_newlines")) and not kwargs.get("encoding"):
            env = kwargs.get("env")
            console = (env if isinstance(env, dict) else os.environ).get("PYTHONIOENCODING", "")
            argv = args[0] if args else kwargs.get("args")
            program = argv[0] if isinstance(argv, (list, tuple)) and argv else argv
            name = os.path.basename(str(program))
            # Only Python speaks the console's code page here; other programs write UTF-8. An
            # isolated child (-I, -E) ignores PYTHONIOENCODING, so here it writes UTF-8 (on Windows
            # it would follow the console's code page, which this mode cannot give it).
            flags = [str(a) for a in argv[1:3]] if isinstance(argv, (list, tuple)) else []
            isolated = any(f.startswith("-") and ("I" in f or "E" in f) for f in flags)
            if console.lower() == "gbk" and (name.startswith("python") or name == "memself") and not isolated:
                kwargs["encoding"] = "gbk"
        real_init(self, *args, **kwargs)

    popen.__init__ = init


def _refuse_posix_imports() -> None:
    import builtins

    real_import = builtins.__import__

    def guarded(name: str, globals: dict | None = None, *args: object, **kwargs: object) -> object:
        importer = str((globals or {}).get("__name__", ""))
        if (
            name in ("fcntl", "termios", "resource")
            and importer.startswith("memself")
            and not importer.startswith("memself.platform")
        ):
            raise ModuleNotFoundError(f"No module named {name!r} (foreign-platform mode)", name=name)
        return real_import(name, globals, *args, **kwargs)  # type: ignore[arg-type]

    builtins.__import__ = guarded  # type: ignore[assignment]


def _socket_module() -> object:
    import _socket

    return _socket


def unix_sockets_only() -> object:
    """Mark a test of what only the Unix-socket transport has (socket files, peer uids, runtime
    folders): skipped in the foreign mode, where the engine listens on loopback TCP."""
    import pytest

    from memself.platform import sockets

    return pytest.mark.skipif(
        not sockets.unix_sockets(), reason="Unix-socket transport only; the foreign mode uses loopback TCP"
    )


def unix_sockets() -> bool:
    from memself.platform import sockets

    return sockets.unix_sockets()
