"""Where the engine of one data directory listens: a socket in a private runtime directory.

The socket lives outside the data directory because ``sun_path`` holds at most ~104 bytes and
data directories (and pytest's temp dirs) can be longer; the name is a short hash of the
resolved data directory, so each data directory gets its own engine. Standard library only,
and cheap: the hook resolves this on every prompt.
"""

from __future__ import annotations

import os
import stat
import sys

RUNTIME_ENV = "MEMSELF_RUNTIME_DIR"
# Linux allows 107 bytes in sun_path, macOS 103; keep a margin.
_SUN_PATH_MAX = 100
PORT_FILE_NAME = "engine-port.json"


class EngineLocation:
    """The files of one engine: socket, single-instance lock, and the TCP fallback's port file."""

    __slots__ = ("data_dir", "key", "lock_path", "port_file", "runtime_dir", "socket_path")

    def __init__(self, data_dir: str, runtime_dir: str, key: str) -> None:
        self.data_dir = data_dir
        self.runtime_dir = runtime_dir
        self.key = key
        self.socket_path = os.path.join(runtime_dir, f"{key}.sock")
        self.lock_path = os.path.join(runtime_dir, f"{key}.lock")
        # The fallback's token must be readable by the user's clients only; the data dir is 0700.
        self.port_file = os.path.join(data_dir, PORT_FILE_NAME)

    def __repr__(self) -> str:
        return f"EngineLocation({self.socket_path!r})"


def own_uid() -> int | None:
    """This process's uid, or None where the platform has no uids (Windows)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def _fnv1a64(text: str) -> str:
    # hashlib costs ~4 ms to import on the hook path; FNV-1a is plenty to tell a user's data
    # directories apart (the directory is private, so a collision is a clash, not an attack).
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", errors="surrogatepass"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def _user_tag() -> str:
    uid = own_uid()
    if uid is not None:
        return str(uid)
    return "".join(c for c in os.environ.get("USERNAME", "user") if c.isalnum()) or "user"


def runtime_dir_candidates() -> list[str]:
    """Runtime directories to use, best first: an override, the XDG one, then the temp dir."""
    override = os.environ.get(RUNTIME_ENV, "").strip()
    if override:
        return [os.path.abspath(override)]
    candidates: list[str] = []
    xdg = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isabs(xdg):
        candidates.append(os.path.join(xdg, "memself"))
    if os.name == "posix":
        # Not $TMPDIR: it differs between a terminal and a GUI host more often than /tmp does,
        # and the hook and the CLI must agree on one engine.
        candidates.append(f"/tmp/memself-{_user_tag()}")
    else:
        tmp = os.environ.get("TEMP") or os.environ.get("TMP") or os.path.expanduser("~")
        candidates.append(os.path.join(tmp, f"memself-{_user_tag()}"))
    return candidates


def locate(data_dir: str | os.PathLike[str]) -> EngineLocation:
    """The engine location of ``data_dir`` (its resolved path decides the socket name)."""
    resolved = os.path.realpath(os.fspath(data_dir))
    key = _fnv1a64(resolved)
    candidates = runtime_dir_candidates()
    for runtime_dir in candidates:
        if len(os.path.join(runtime_dir, f"{key}.sock").encode()) <= _SUN_PATH_MAX:
            return EngineLocation(resolved, runtime_dir, key)
    return EngineLocation(resolved, candidates[-1], key)


def dir_state(path: str) -> str:
    """"missing", "private" (a real directory, no symlink, ours, closed to others) or "unsafe".

    One lstat, so a directory created by a concurrent engine between two checks cannot make a
    missing directory look unsafe.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unsafe"
    if not stat.S_ISDIR(info.st_mode):
        return "unsafe"
    uid = own_uid()
    if uid is None:  # no uids, no modes to check (Windows)
        return "private"
    return "private" if info.st_uid == uid and info.st_mode & 0o077 == 0 else "unsafe"


def ensure_private_dir(path: str) -> None:
    """Create ``path`` with mode 0700, or tighten our own existing one; OSError if it is unsafe.

    A directory someone else owns (or a symlink planted in /tmp) is refused, never used: a client
    would otherwise send its prompts to a stranger's socket.
    """
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # a file or a dangling symlink: reported below
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"not a directory: {path}")
    uid = own_uid()
    if uid is None:
        return
    if info.st_uid != uid:
        raise OSError(f"owned by uid {info.st_uid}, not {uid}: {path}")
    if info.st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)


def code_fingerprint() -> str:
    """The installed memself's identity: version plus mtime and size of its ``__init__.py``.

    Reinstalling (wheel or editable) rewrites that file, so an engine started from older code
    answers "version-mismatch" to newer clients and is replaced.
    """
    import memself

    try:
        info = os.stat(memself.__file__ or "")
        return f"{memself.__version__}:{info.st_mtime_ns}:{info.st_size}"
    except OSError:
        return f"{memself.__version__}:?"


def package_parent() -> str:
    """The directory that must be on ``sys.path`` for ``import memself`` to find this copy."""
    import memself

    return os.path.dirname(os.path.dirname(os.path.abspath(memself.__file__ or sys.argv[0])))
