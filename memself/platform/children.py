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
