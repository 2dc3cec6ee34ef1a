"""Whether a process still exists, asked without disturbing it.

POSIX: ``kill(pid, 0)``. Not on Windows, where ``os.kill(pid, 0)`` sends Ctrl-C (signal 0 is
``CTRL_C_EVENT`` there) to the process's group: the process is opened for query instead and its
exit code read. Standard library only.
"""

import os

from memself.platform import system

_PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
_STILL_ACTIVE = 259
_ERROR_ACCESS_DENIED = 5


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (possibly another user's)."""
    if pid <= 0:
        return False
    if system.real_windows():
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _windows_pid_alive(pid: int) -> bool:  # pragma: no cover - Windows only
    import ctypes

    kernel32 = getattr(ctypes, "windll").kernel32  # noqa: B009 - Windows only, absent from stubs here
    handle = kernel32.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return bool(kernel32.GetLastError() == _ERROR_ACCESS_DENIED)
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == _STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)
