"""Where per-user runtime files go: the engine's socket folder, and the folder for private
temporary locks.

POSIX: ``$XDG_RUNTIME_DIR/memself``, else ``/tmp/memself-<uid>`` (not ``$TMPDIR``: it differs
between a terminal and a GUI host more often than /tmp does, and the hook and the CLI must agree
on one engine). Windows: ``%LOCALAPPDATA%\\memself``, private to the user by the profile's ACL.

Standard library only and cheap: the hook resolves this on every prompt.
"""

import os

from memself.platform import files, system


def user_tag() -> str:
    """A short name of the user for shared folders: the uid, or the Windows user name."""
    uid = files.own_uid()
    if uid is not None:
        return str(uid)
    name = os.environ.get("USERNAME") or os.environ.get("USER") or "user"
    return "".join(c for c in name if c.isalnum()) or "user"


def base_candidates() -> list[str]:
    """Runtime folders to use, best first (without the user's override)."""
    candidates: list[str] = []
    if system.windows():
        local = os.environ.get("LOCALAPPDATA", "").strip()
        if local and os.path.isabs(local):
            candidates.append(os.path.join(local, "memself"))
        tmp = os.environ.get("TEMP") or os.environ.get("TMP") or os.path.expanduser("~")
        candidates.append(os.path.join(tmp, f"memself-{user_tag()}"))
        return candidates
    xdg = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isabs(xdg):
        candidates.append(os.path.join(xdg, "memself"))
    candidates.append(f"/tmp/memself-{user_tag()}")
    return candidates


def temp_base() -> str:
    """The folder for private folders created on demand (``mkdtemp``)."""
    if not system.windows():
        return "/tmp"
    import tempfile

    return tempfile.gettempdir()
