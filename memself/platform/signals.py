"""Which signals exist: the hook's alarm and the engine's shutdown signals.

Windows has no ``SIGALRM``, no ``setitimer`` and no ``SIGHUP``; there the hook's deadline is a
watchdog thread and the engine stops on SIGTERM (and Ctrl-Break) only.

Standard library only: the hook asks before it arms its deadline.
"""

from memself.platform import system

_POSIX_SHUTDOWN = ("SIGTERM", "SIGINT", "SIGHUP")
_WINDOWS_SHUTDOWN = ("SIGTERM", "SIGBREAK")


def alarm_available(module: object) -> bool:
    """True when ``module`` (``_signal`` or ``signal``) can deliver the hook's alarm here."""
    return hasattr(module, "setitimer") and hasattr(module, "SIGALRM") and not system.windows()


def shutdown_signal_names() -> tuple[str, ...]:
    """Names of the signals the engine treats as "stop", those the system lacks left to the caller."""
    return _WINDOWS_SHUTDOWN if system.windows() else _POSIX_SHUTDOWN
