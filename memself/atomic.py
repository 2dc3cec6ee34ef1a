"""Atomic file replacement: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, mode: int = 0o600) -> None:
    """Write to a temp file in the same folder, fsync it, rename it over ``path``, fsync the folder.

    On any failure (full disk, read-only folder) the temp file is removed and the old file stays.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.tmp.{os.getpid()}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the directory entry is flushed too.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
