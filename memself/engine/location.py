"""Where the engine of one data directory listens: a socket in a private runtime directory.

The socket lives outside the data directory because ``sun_path`` holds at most ~104 bytes and
data directories (and pytest's temp dirs) can be longer; the name is a short hash of the
resolved data directory. The single-instance lock lives in the data directory itself, so one
data directory has one engine even when processes disagree on the runtime directory (a terminal
and a GUI host with different ``XDG_RUNTIME_DIR``). The engine records its socket's path in the
data directory too; a client that finds no engine where it looks first reads that record.
When the runtime directory is unsafe (another user created ``/tmp/memself-<uid>`` first), the
engine listens in a private directory it creates itself, found through the same record.

Standard library only, and cheap: the hook resolves this on every prompt.
"""

import os
import stat

from memself.platform import files, runtime

RUNTIME_ENV = "MEMSELF_RUNTIME_DIR"
# Linux allows 107 bytes in sun_path, macOS 103; keep a margin.
_SUN_PATH_MAX = 100
PORT_FILE_NAME = "engine-port"
LOCK_FILE_NAME = "engine.lock"
SOCKET_RECORD_NAME = "engine-socket"
_RECORD_MAX_BYTES = 4096


class EngineLocation:
    """The files of one engine: socket, single-instance lock, the record of where the socket
    is, and the TCP fallback's port file."""

    __slots__ = ("data_dir", "key", "lock_path", "port_file", "record_path", "runtime_dir", "socket_path")

    def __init__(self, data_dir: str, runtime_dir: str, key: str) -> None:
        self.data_dir = data_dir
        self.runtime_dir = runtime_dir
        self.key = key
        self.socket_path = os.path.join(runtime_dir, f"{key}.sock")
        self.lock_path = os.path.join(data_dir, LOCK_FILE_NAME)
        self.record_path = os.path.join(data_dir, SOCKET_RECORD_NAME)
        # The fallback's token must be readable by the user's clients only; the data dir is 0700.
        self.port_file = os.path.join(data_dir, PORT_FILE_NAME)

    def moved_to(self, runtime_dir: str) -> "EngineLocation":
        """The same engine listening in another runtime directory."""
        return EngineLocation(self.data_dir, runtime_dir, self.key)

    def __repr__(self) -> str:
        return f"EngineLocation({self.socket_path!r})"


def own_uid() -> int | None:
    """This process's uid, or None where the system has no uids a peer check can use (Windows)."""
    return files.own_uid()


def _fnv1a64(text: str) -> str:
    # hashlib is costly to import on the hook path; FNV-1a is plenty to tell a user's data
    # directories apart (the directory is private, so a collision is a clash, not an attack).
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", errors="surrogatepass"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def runtime_dir_candidates() -> list[str]:
    """Runtime directories to use, best first: an override, then the system's (``platform.runtime``)."""
    override = os.environ.get(RUNTIME_ENV, "").strip()
    if override:
        return [os.path.abspath(override)]
    return runtime.base_candidates()


def locate(data_dir: str | os.PathLike[str]) -> EngineLocation:
    """The engine location of ``data_dir`` (its resolved path decides the socket name)."""
    resolved = os.path.realpath(os.fspath(data_dir))
    key = _fnv1a64(resolved)
    candidates = runtime_dir_candidates()
    for runtime_dir in candidates:
        if len(os.path.join(runtime_dir, f"{key}.sock").encode()) <= _SUN_PATH_MAX:
            return EngineLocation(resolved, runtime_dir, key)
    return EngineLocation(resolved, candidates[-1], key)


def recorded_socket(location: EngineLocation) -> str | None:
    """The socket path the running engine recorded in the data directory, when it differs from
    ``location.socket_path`` and lies in a private directory of ours; None otherwise.

    The record is trusted only if it is a regular file of ours that nobody else may write; the
    caller still checks the peer's uid on the socket.
    """
    try:
        fd = os.open(
            location.record_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        )
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (
            files.modes_meaningful() and (info.st_uid != os.getuid() or info.st_mode & 0o022)
        ):
            return None
        data = os.read(fd, _RECORD_MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    path = data.decode("utf-8", errors="replace").strip()
    if not path.endswith(".sock") or not os.path.isabs(path) or path == location.socket_path:
        return None
    return path if dir_state(os.path.dirname(path)) == "private" else None


def fallback_prefix() -> str:
    """Name prefix of the private runtime directories an engine creates for itself."""
    return f"memself-{runtime.user_tag()}-"


def make_fallback_dir(location: EngineLocation) -> str:
    """A private runtime directory for an engine whose usual one is unsafe: the one the last
    engine of this data directory used, if it is still ours, else a new one. ``mkdtemp``
    creates it 0700 under a random name, so nobody can plant it first. Engine side only."""
    previous = recorded_socket(location)
    if previous is not None and os.path.basename(os.path.dirname(previous)).startswith(fallback_prefix()):
        return os.path.dirname(previous)
    import tempfile

    return tempfile.mkdtemp(prefix=fallback_prefix(), dir=runtime.temp_base())


def dir_problem(path: str) -> str:
    """Why ``path`` is not usable as a runtime directory, in words for the user; "" if it is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"无法读取：{exc.strerror or exc}"
    if stat.S_ISLNK(info.st_mode):
        return "是一个符号链接"
    if not stat.S_ISDIR(info.st_mode):
        return "不是目录"
    return files.private_problem(info)


def dir_state(path: str) -> str:
    """ "missing", "private" (a real directory, no symlink, ours, closed to others) or "unsafe".

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
    return "unsafe" if files.private_problem(info) else "private"


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
    if not files.modes_meaningful():
        return
    if info.st_uid != os.getuid():
        raise OSError(f"owned by uid {info.st_uid}, not {os.getuid()}: {path}")
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
