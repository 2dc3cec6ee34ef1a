"""Which system's rules apply: the one place that reads ``sys.platform``.

``windows()`` is true on Windows and, for the test suite, under ``MEMSELF_FOREIGN_PLATFORM=1``
(the Windows branches run on Linux wherever Linux can run them). ``real_windows()`` is true only
on Windows itself, for the few calls that exist nowhere else (``creationflags``, ``msvcrt``).

Standard library only and cheap: the hook imports it on every prompt.
"""

import os
import sys

FOREIGN_ENV = "MEMSELF_FOREIGN_PLATFORM"

_REAL_WINDOWS = sys.platform == "win32"
_MACOS = sys.platform == "darwin"


def foreign() -> bool:
    """True when a non-Windows machine is told to behave as Windows would (tests only)."""
    return not _REAL_WINDOWS and os.environ.get(FOREIGN_ENV, "") == "1"


def windows() -> bool:
    """True where Windows' rules apply: on Windows, or in the foreign-platform mode."""
    return _REAL_WINDOWS or foreign()


def real_windows() -> bool:
    """True on Windows itself only."""
    return _REAL_WINDOWS


def macos() -> bool:
    """True on macOS (and never in the foreign-platform mode)."""
    return _MACOS and not foreign()


def name() -> str:
    """ "windows", "macos" or "linux" (any other POSIX system counts as Linux)."""
    if windows():
        return "windows"
    return "macos" if _MACOS else "linux"


def real_name() -> str:
    """The system's own name, even in the foreign-platform mode: for what only the real system
    can run (the shell that runs a registered hook command)."""
    if _REAL_WINDOWS:
        return "windows"
    return "macos" if _MACOS else "linux"
