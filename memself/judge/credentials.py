"""Local secrets of the side judge: the HMAC ``session-secret`` and the API key file.

Neither value ever leaves the machine: not through MCP, a log, a model request or the context.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from memself.atomic import fsync_dir, write_atomic
from memself.errors import (
    InvalidInput,
    KeyEndpointMismatch,
    KeyFileInvalid,
    KeyUnconfirmed,
    SecretUnavailable,
)
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import files as platform_files

_SECRET_RE = re.compile(r"^[a-f0-9]{64}$")
# The endpoint the API key was entered for; the original reads only ``apiKey`` and ignores it.
BOUND_FIELD = "boundApiBase"
_COMPLETIONS = "/chat/completions"
_ASIDE_PREFIX = "session-secret.invalid-"
_LOCK_NAME = ".session-secret.lock"
# An empty secret file younger than this may still be another writer's exclusive create.
_EMPTY_GRACE_S = 2.0
_EMPTY_WAIT_STEPS = 50


def load_or_create_session_secret(paths: DataPaths) -> str:
    """The 64-hex local HMAC secret (§4.2), created on first use; see ``ensure_session_secret``."""
    return ensure_session_secret(paths)[0]


def ensure_session_secret(paths: DataPaths) -> tuple[str, Path | None]:
    """The secret, and where an invalid one was set aside if this call replaced it (else None).

    Created atomically: the value is written to a temp file and fsynced, then hard-linked into
    place, so no reader ever sees a short file and racing first uses end with the one secret
    whose link won. A file that does not hold a valid secret (0 bytes after a full disk,
    garbage) is renamed aside, never deleted, and replaced; a replacement that cannot be written
    leaves everything as it was and raises ``SecretUnavailable``. Pending proposals sealed with
    the old secret are no longer trusted, which is the point: nobody can vouch for them.
    """
    target = paths.session_secret
    state, value = _secret_state(target, wait=True)
    if state == "ok":
        return value, None
    paths.ensure()
    if state == "missing":
        fresh = os.urandom(32).hex()  # what secrets.token_hex does, without its imports
        tmp = _write_temp_secret(target, fresh)
        try:
            placed = _link_into_place(tmp, target, fresh)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if placed is not None:
            return placed, None
    return _replace_invalid(paths)


def read_session_secret(paths: DataPaths) -> str | None:
    """The secret if the file holds a valid one, else ``None``; never creates or repairs it."""
    state, value = _secret_state(paths.session_secret)
    return value if state == "ok" else None


def session_secret_problem(paths: DataPaths) -> str:
    """Why the secret file is unusable ("" when it is valid or not created yet)."""
    state, value = _secret_state(paths.session_secret)
    return value if state == "invalid" else ""


def set_aside_secrets(paths: DataPaths) -> list[Path]:
    """Invalid secrets that were renamed aside, oldest first."""
    try:
        found = list(paths.root.glob(_ASIDE_PREFIX + "*"))
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime if p.exists() else 0.0)


def _secret_state(target: Path, wait: bool = False) -> tuple[str, str]:
    """("ok", secret), ("missing", "") or ("invalid", why)."""
    for _attempt in range(_EMPTY_WAIT_STEPS if wait else 1):
        try:
            raw = target.read_bytes()
        except FileNotFoundError:
            return "missing", ""
        except OSError as exc:
            return "invalid", f"无法读取（{exc.strerror or type(exc).__name__}）"
        value = raw.decode("utf-8", errors="replace").strip()
        if _SECRET_RE.match(value):
            return "ok", value
        if raw or not wait or not _just_created(target):
            break
        # A fresh empty file may be an older writer's exclusive create in progress.
        time.sleep(0.01)
    return "invalid", "是空文件" if not raw.strip() else "内容不是 64 位小写十六进制"


def _just_created(target: Path) -> bool:
    try:
        return time.time() - target.stat().st_mtime < _EMPTY_GRACE_S
    except OSError:
        return False


def _write_temp_secret(target: Path, value: str) -> Path:
    """The new secret in a temp file beside ``target``, on disk (fsynced) before anyone sees it."""
    # mkstemp creates it readable by its owner only; Windows' Python before 3.13 has no fchmod.
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.tmp.", dir=target.parent)
    try:
        os.write(fd, (value + "\n").encode("ascii"))
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise SecretUnavailable(f"无法写入本地会话密钥 {target}（{exc.strerror or exc}）") from exc
    os.close(fd)
    return Path(name)


def _link_into_place(tmp: Path, target: Path, value: str) -> str | None:
    """Put ``tmp`` at ``target`` unless a file is already there; the secret now in place, or
    None when what is in place is not valid."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        state, other = _secret_state(target, wait=True)
        return other if state == "ok" else None
    except OSError as exc:
        try:  # filesystems without hard links: an exclusive create of the finished content
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | platform_files.BINARY, 0o600)
        except FileExistsError:
            state, other = _secret_state(target, wait=True)
            return other if state == "ok" else None
        except OSError:
            raise SecretUnavailable(f"无法写入本地会话密钥 {target}（{exc.strerror or exc}）") from exc
        try:
            os.write(fd, (value + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(target.parent)
    return value


def _replace_invalid(paths: DataPaths) -> tuple[str, Path | None]:
    """Set an invalid secret aside and put a new one in its place, one process at a time: a
    second process must not move the new secret aside as if it were the old one."""
    target = paths.session_secret
    with _secret_lock(paths):
        state, problem = _secret_state(target, wait=True)
        if state == "ok":
            return problem, None  # another process has just replaced it
        fresh = os.urandom(32).hex()
        tmp = _write_temp_secret(target, fresh)  # a full disk stops here, before anything moves
        try:
            aside = None
            if state == "invalid":
                aside = target.with_name(_ASIDE_PREFIX + os.urandom(4).hex())
                try:
                    os.rename(target, aside)
                except FileNotFoundError:
                    aside = None
                except OSError as exc:
                    raise SecretUnavailable(
                        f"本地会话密钥 {target} 内容无效，且无法另存（{exc.strerror or exc}）"
                    ) from exc
                else:
                    log(paths, "session-secret-invalid", problem=problem, moved_to=aside.name)
            placed = _link_into_place(tmp, target, fresh)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if placed is None:
            raise SecretUnavailable(f"本地会话密钥 {target} 内容无效")
        return placed, aside


@contextlib.contextmanager
def _secret_lock(paths: DataPaths) -> Iterator[None]:
    from memself.platform import locks

    try:
        fd = os.open(paths.root / _LOCK_NAME, os.O_RDWR | os.O_CREAT | platform_files.BINARY, 0o600)
    except OSError as exc:
        raise SecretUnavailable(f"无法锁定本地会话密钥（{exc.strerror or exc}）") from exc
    try:
        try:
            locks.exclusive(fd)
        except OSError as exc:  # a file system without locks: say which file
            raise SecretUnavailable(
                f"无法锁定本地会话密钥 {paths.root / _LOCK_NAME}（{exc.strerror or exc}）"
            ) from exc
        yield
    finally:
        os.close(fd)


class KeyFile:
    """What ``side-secret.json`` holds: ``state`` is "missing", "invalid" or "ok".

    ``bound_base`` is the endpoint the key was entered for; "" for a file in the original's
    format, which is sent nowhere until the user confirms an endpoint for it (``bind_key``).
    """

    __slots__ = ("bound_base", "key", "problem", "state")

    def __init__(self, state: str, key: str = "", bound_base: str = "", problem: str = "") -> None:
        self.state = state
        self.key = key
        self.bound_base = bound_base
        self.problem = problem


def read_key_file(paths: DataPaths) -> KeyFile:
    """Read ``side-secret.json`` without ever raising; an unusable file says why in ``problem``.

    An empty key counts as not configured (what the original wrote on "skip"); a file that exists
    but cannot be used (unreadable, 0 bytes after a full disk, not JSON) is "invalid", so the hook
    can say the key is broken instead of quietly looking unconfigured.
    """
    try:
        raw = paths.side_secret.read_bytes()
    except FileNotFoundError:
        return KeyFile("missing")
    except OSError as exc:
        return KeyFile("invalid", problem=f"无法读取（{exc.strerror or type(exc).__name__}）")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return KeyFile("invalid", problem="不是合法的 JSON" if raw.strip() else "是空文件")
    if not isinstance(data, dict):
        return KeyFile("invalid", problem="不是 JSON 对象")
    key, base = data.get("apiKey"), data.get(BOUND_FIELD, "")
    if key is None or (isinstance(key, str) and not key.strip()):
        return KeyFile("missing")
    if not isinstance(key, str) or any(ch in key.strip() for ch in "\r\n\0"):
        return KeyFile("invalid", problem="apiKey 不是一行字符串")
    if not isinstance(base, str):
        return KeyFile("invalid", problem=f"{BOUND_FIELD} 不是字符串")
    return KeyFile("ok", key.strip(), base.strip())


def write_api_key(paths: DataPaths, api_key: str, base: str | None = None) -> None:
    """Store the API key bound to ``base``, the endpoint it was entered for (mode 600, atomic).

    ``apiKey`` keeps the original's name so the original plugin still reads the file. Without a
    base the key is sent nowhere until the user confirms one. An empty key removes the file.
    """
    key = api_key.strip()
    if any(ch in key for ch in "\r\n\0"):
        raise InvalidInput("apiKey 不能包含换行或空字符")
    paths.ensure()
    if not key:
        with contextlib.suppress(FileNotFoundError):
            paths.side_secret.unlink()
        return
    data = {"apiKey": key}
    if base and base.strip():
        data[BOUND_FIELD] = base.strip()
    write_atomic(paths.side_secret, json.dumps(data, ensure_ascii=False, indent=2) + "\n", mode=0o600)


def normalise_base(url: str) -> str:
    """Scheme, host, port and path of an endpoint, for comparing two spellings of one address.

    Case of scheme and host, a default port, a trailing slash and a trailing ``/chat/completions``
    (which the request adds anyway) do not make two bases differ; anything else does.
    """
    text = url.strip()
    from urllib.parse import urlsplit, urlunsplit  # only when two spellings differ

    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text.rstrip("/")
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return text.rstrip("/")
    port = port or {"http": 80, "https": 443}.get(scheme)
    path = parts.path.rstrip("/")
    if path.endswith(_COMPLETIONS):
        path = path[: -len(_COMPLETIONS)].rstrip("/")
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + (f"[{host}]" if ":" in host else host)
    netloc += f":{port}" if port else ""
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def same_base(first: str, second: str) -> bool:
    if first.strip() == second.strip():
        return True
    return normalise_base(first) == normalise_base(second)


def shown_base(url: str) -> str:
    """An endpoint fit for a log line or a message: any ``user:password@`` part is dropped."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        return url.strip()
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"


def key_state(found: KeyFile, configured_base: str) -> str:
    """ "missing", "invalid", "mismatch" (bound to another endpoint), "unbound" or "ok"."""
    if found.state != "ok":
        return found.state
    if not found.bound_base:
        return "unbound"
    return "ok" if same_base(found.bound_base, configured_base) else "mismatch"


def key_for_endpoint(paths: DataPaths, configured_base: str) -> tuple[str, str]:
    """``(api_key, base)`` for a request to the configured endpoint, or an error; nothing is sent
    before this returns.

    The base returned is the one the key was entered for (equal to the configured one up to
    spelling), so an address that two URL parsers read differently cannot steer the key
    elsewhere. A key in the original's format is never bound here: the address configured at
    its first use may be one something else wrote (the original's ``memory_config`` changes it
    unasked), and binding then would protect the key's new destination. It waits for the user
    (``bind_key``: setup, ``memself key set``, a doctor prompt at a terminal).
    """
    found = read_key_file(paths)
    if found.state == "missing":
        raise KeyFileInvalid(f"没有接口密钥（{paths.side_secret}）")
    if found.state == "invalid":
        raise KeyFileInvalid(f"接口密钥文件 {paths.side_secret} {found.problem}")
    base = configured_base.strip()
    if not base:
        raise KeyFileInvalid("config.json 没有 sideApiBase")
    if not found.bound_base:
        raise KeyUnconfirmed(
            f"apiKey 是原插件格式，还没有确认可以发往哪个地址（sideApiBase 现在是 {shown_base(base)}）；"
            "为防密钥和对话被发往别处，没有发送任何请求。在终端运行 memself doctor 按提示确认地址，"
            "或运行 memself key set 重新输入 apiKey"
        )
    if not same_base(found.bound_base, base):
        raise KeyEndpointMismatch(
            f"apiKey 是为 {shown_base(found.bound_base)} 录入的，而 config.json 的 sideApiBase 现在是 "
            f"{shown_base(base)}；为防密钥和对话被发往别处，没有发送任何请求。确认新地址可信后运行 "
            "memself key set 重新输入 apiKey"
        )
    return found.key, found.bound_base


def bind_key(paths: DataPaths, base: str) -> None:
    """Bind a key in the original's format to ``base``, which the user has just confirmed.

    Only an unbound key is bound: one already bound to another endpoint is re-entered with
    ``memself key set``, never moved by a confirmation."""
    found = read_key_file(paths)
    if found.state != "ok":
        raise KeyFileInvalid(f"接口密钥文件 {paths.side_secret} {found.problem or '不存在'}")
    if found.bound_base:
        raise InvalidInput(f"apiKey 已经绑定 {shown_base(found.bound_base)}，要换地址请运行 memself key set")
    write_api_key(paths, found.key, base)
    log(paths, "side-key-bound", base=shown_base(base))
