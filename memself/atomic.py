"""Atomic file replacement: a reader sees the old file or the new one, never half of either.

A path that is a symlink (a user's sync folder, a dotfile manager) is written through: the new
content is staged in the *target's* folder and renamed over the target, so the link stays a link
and the rename stays atomic. Temp files are named ``.<name>.tmp.<pid>.<random>`` so a later
writer can tell a killed writer's leftover (dead pid) from a live one's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from memself.errors import WriteFailed
from memself.platform import files

TMP_MARK = ".tmp."


def real_target(path: Path) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or the end of its symlink chain."""
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if target.is_symlink():  # realpath stops inside a loop
        raise WriteFailed(
            f"{path} 是符号链接，但它指向自己或形成了循环，无法写入：请把它换成普通文件或指向一个真实的文件"
        )
    return target


def temp_prefix(target: Path) -> str:
    return f".{target.name}{TMP_MARK}{os.getpid()}."


def stage(path: Path, data: str | bytes | list[bytes | memoryview], mode: int = 0o600) -> tuple[Path, Path]:
    """Write ``data`` (or its chunks, in order) to a temp file beside ``path``'s real target and
    fsync it.

    Returns ``(staged, target)``; the caller renames one over the other (or removes the staged
    file). On failure nothing is left behind.
    """
    payload = [data.encode("utf-8")] if isinstance(data, str) else [data] if isinstance(data, bytes) else data
    target = real_target(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(target), dir=target.parent)
    except OSError as exc:
        raise _through_link_error(path, target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise _through_link_error(path, target, exc) from exc
        raise
    return Path(tmp_name), target


def write_atomic(path: Path, data: str | bytes, mode: int = 0o600) -> None:
    """Write to a temp file in the same folder, fsync it, rename it over ``path``, fsync the folder.

    On any failure (full disk, read-only folder) the temp file is removed and the old file stays.
    A symlinked ``path`` is written through to its target; the link is never replaced.
    """
    staged, target = stage(path, data, mode)
    try:
        files.replace(staged, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        if isinstance(exc, OSError):
            raise _through_link_error(path, target, exc) from exc
        raise
    fsync_dir(target.parent)


def save_npy(path: Path, array: Any, mode: int = 0o600) -> None:
    """``numpy.save`` with ``write_atomic``'s guarantees: the array is streamed into the temp file
    (a large index is never copied into memory as bytes first), fsynced, renamed over ``path``."""
    import numpy as np

    target = real_target(path)
    fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(target), dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.save(handle, array, allow_pickle=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        files.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_dir(target.parent)


def append_lines(path: Path, data: bytes) -> None:
    """Append whole lines to ``path``'s real target and fsync them.

    A file whose last line lacks its newline (a writer killed mid-line) gets one first, so the
    torn line stays a line of its own (quarantined) instead of swallowing the new one."""
    target = real_target(path)
    try:
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | files.BINARY, 0o600)
    except OSError as exc:
        raise _through_link_error(path, target, exc) from exc
    size = -1
    try:
        size = os.fstat(fd).st_size
        if size and files.read_at(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException as exc:
        if size >= 0:  # a full disk may take part of the lines: the file goes back to what it was
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
        if isinstance(exc, OSError):
            raise _through_link_error(path, target, exc) from exc
        raise
    finally:
        os.close(fd)
    if not size:
        fsync_dir(target.parent)


def _through_link_error(path: Path, target: Path, exc: OSError) -> OSError | WriteFailed:
    """A plain OSError for an ordinary file (callers word it); a clear refusal through a link."""
    if target == path:
        return exc
    return WriteFailed(
        f"{path} 是指向 {target} 的符号链接，但无法在 {target.parent} 里写入"
        f"（{exc.strerror or exc}），链接和原文件都没有改动：请让该文件夹可写，"
        "或把链接换成普通文件"
    )


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries: a rename or a link is durable only once its directory is."""
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
