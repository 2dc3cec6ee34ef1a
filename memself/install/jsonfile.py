"""Careful edits of other programs' JSON files (a host's settings, hooks and MCP lists).

These files belong to the user and to their client, not to us. So an edit here:
- refuses a file that is not valid JSON instead of resetting it (the user's content wins);
- changes only our own entries, keeps every other key and its order, and re-serialises in the
  file's own indent style, escaping and trailing newline, so a no-op edit gives identical bytes;
- backs up the user's original once (``<file>.memself.bak``, never overwritten later);
- writes atomically (temp file in the same folder, fsync, rename) under a lock, keeping the mode;
- on removal, puts the original bytes back when what is left equals the backup.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.errors import MemselfError

BACKUP_SUFFIX = ".memself.bak"
_NEW_FILE_MODE = 0o644


class ForeignFileError(MemselfError):
    """A host's file we must not touch: not JSON, not an object, or a key of the wrong type."""


@dataclass(frozen=True)
class JsonStyle:
    """How a file was serialised, so a rewrite looks like the client wrote it."""

    indent: str | None = "  "  # None: one line
    separators: tuple[str, str] = (",", ": ")
    ensure_ascii: bool = False
    trailing_newline: bool = True
    bom: bool = False

    def dumps(self, doc: object) -> str:
        text = json.dumps(doc, indent=self.indent, separators=self.separators, ensure_ascii=self.ensure_ascii)
        return ("\ufeff" if self.bom else "") + text + ("\n" if self.trailing_newline else "")


DEFAULT_STYLE = JsonStyle()


@dataclass(frozen=True)
class JsonDoc:
    """A parsed file: its object, its style, and its exact bytes (None when the file is absent)."""

    path: Path
    data: dict[str, Any]
    style: JsonStyle
    raw: bytes | None

    @property
    def exists(self) -> bool:
        return self.raw is not None


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def load(path: Path) -> JsonDoc:
    """Read ``path`` as a JSON object. Absent or blank gives ``{}``; anything else invalid raises."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return JsonDoc(path, {}, DEFAULT_STYLE, None)
    except OSError as exc:
        raise ForeignFileError(f"无法读取 {path}：{exc.strerror or exc}") from exc
    return JsonDoc(path, *parse_bytes(path, raw), raw)


def parse_bytes(path: Path, raw: bytes) -> tuple[dict[str, Any], JsonStyle]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ForeignFileError(f"{path} 不是 UTF-8 文本，为免损坏你的内容未做任何修改") from exc
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    if not body.strip():
        return {}, JsonStyle(bom=bom)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ForeignFileError(
            f"{path} 不是合法的 JSON（第 {exc.lineno} 行第 {exc.colno} 列：{exc.msg}），"
            f"为免覆盖你的内容未做任何修改；请修好它后重新运行"
        ) from exc
    if not isinstance(data, dict):
        raise ForeignFileError(f"{path} 的顶层不是 JSON 对象，为免覆盖你的内容未做任何修改")
    return data, detect_style(body, data, bom)


def detect_style(body: str, data: object, bom: bool = False) -> JsonStyle:
    """The style that reproduces ``body`` exactly if one does, else the closest guess."""
    trailing = body.endswith("\n")
    core = body.rstrip("\r\n")
    ascii_only = "\\u" in core and all(ord(c) < 128 for c in core)
    candidates: list[JsonStyle] = []
    indent = _detect_indent(core)
    if indent is not None:
        candidates.append(JsonStyle(indent, (",", ": "), ascii_only, trailing, bom))
    else:
        candidates.append(JsonStyle(None, (", ", ": "), ascii_only, trailing, bom))
        candidates.append(JsonStyle(None, (",", ":"), ascii_only, trailing, bom))
    for style in candidates:
        if (
            json.dumps(
                data, indent=style.indent, separators=style.separators, ensure_ascii=style.ensure_ascii
            )
            == core
        ):
            return style
    if indent is None and "\n" not in core:
        return candidates[0]
    # Not reproducible (hand-edited, odd spacing): keep what we can, 2 spaces otherwise.
    return JsonStyle(indent or "  ", (",", ": "), ascii_only, trailing, bom)


def _detect_indent(core: str) -> str | None:
    for line in core.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return None


def render(doc: JsonDoc, data: dict[str, Any]) -> bytes:
    """Bytes of ``data`` in ``doc``'s style; the original bytes when nothing changed."""
    if doc.raw is not None and data == doc.data:
        return doc.raw
    return doc.style.dumps(data).encode("utf-8")


def expect_dict(parent: dict[str, Any], key: str, path: Path, where: str) -> dict[str, Any] | None:
    """``parent[key]`` when it is an object or absent (None); refuse any other type."""
    value = parent.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise ForeignFileError(f"{path} 里的 {where} 应为 JSON 对象，为免覆盖你的内容未做任何修改")


def expect_list(parent: dict[str, Any], key: str, path: Path, where: str) -> list[Any] | None:
    value = parent.get(key)
    if value is None or isinstance(value, list):
        return value
    raise ForeignFileError(f"{path} 里的 {where} 应为 JSON 数组，为免覆盖你的内容未做任何修改")


Transform = Callable[[dict[str, Any], Path], dict[str, Any]]


@dataclass(frozen=True)
class Outcome:
    """What one file edit did (or would do)."""

    path: Path
    before: bytes | None
    after: bytes | None  # None: the file is (or stays) absent

    @property
    def changed(self) -> bool:
        return self.before != self.after


def preview_edit(path: Path, transform: Transform) -> Outcome:
    """What ``apply_edit`` would write, without writing (plans and --dry-run)."""
    doc = load(path)
    return Outcome(path, doc.raw, _edit_bytes(doc, transform))


def apply_edit(path: Path, transform: Transform) -> Outcome:
    """Load, transform and write ``path`` under a lock, backing up the user's original once.

    ``transform`` gets a deep copy of the object and returns the new one.
    """
    with _locked(path):
        doc = load(path)
        target = _edit_bytes(doc, transform)
        _commit(doc, target)
        return Outcome(path, doc.raw, target)


def preview_removal(path: Path, remove: Transform, install: Transform) -> Outcome:
    doc = load(path)
    return Outcome(path, doc.raw, _removal_bytes(doc, remove, install))


def apply_removal(path: Path, remove: Transform, install: Transform) -> Outcome:
    """Take our entries out of ``path``, and give back the user's exact bytes where we can.

    Containers our removal emptied are dropped unless the user's backup had them. When the
    result equals the backup, the backup's bytes come back and the backup goes. A file that
    did not exist before us (no backup) and now holds only what ``install`` would create from
    nothing is deleted.
    """
    with _locked(path):
        doc = load(path)
        target = _removal_bytes(doc, remove, install)
        _commit(doc, target)
        bak = backup_path(path)
        if target is None or (bak.exists() and _file_bytes(bak) == target):
            bak.unlink(missing_ok=True)
        return Outcome(path, doc.raw, target)


def _edit_bytes(doc: JsonDoc, transform: Transform) -> bytes | None:
    new = transform(copy.deepcopy(doc.data), doc.path)
    if not doc.exists and not new:
        return None
    return render(doc, new)


def _removal_bytes(doc: JsonDoc, remove: Transform, install: Transform) -> bytes | None:
    if not doc.exists:
        return None
    original = _file_bytes(backup_path(doc.path))
    backup: dict[str, Any] | None = None
    users_own: dict[str, Any] | None = None
    if original is not None:
        with contextlib.suppress(ForeignFileError):
            backup = parse_bytes(doc.path, original)[0]
            # What the user had apart from entries of ours (or the original plugin's).
            users_own = remove(copy.deepcopy(backup), doc.path)
            prune_emptied(users_own, backup, None)
    new = remove(copy.deepcopy(doc.data), doc.path)
    prune_emptied(new, doc.data, users_own)
    if new == doc.data:
        return doc.raw
    if backup is not None and backup == new:
        return original
    if not new and users_own == {}:
        return None  # the file held nothing but ours and the original plugin's entries
    if original is None:
        skeleton = remove(install({}, doc.path), doc.path)
        prune_emptied(skeleton, install({}, doc.path), None)
        if new == skeleton:
            return None
    return render(doc, new)


def prune_emptied(new: dict[str, Any], old: dict[str, Any], reference: object) -> None:
    """Drop objects and arrays that were non-empty in ``old``, are empty in ``new``, and are not
    in ``reference`` (the user's own content; None: the user had nothing, prune freely)."""
    for key in list(new):
        value = new[key]
        before = old.get(key)
        ref = reference.get(key) if isinstance(reference, dict) else None
        if isinstance(value, dict) and isinstance(before, dict):
            prune_emptied(value, before, ref)
        kept_by_user = isinstance(reference, dict) and key in reference
        if (
            isinstance(value, (dict, list))
            and not value
            and isinstance(before, (dict, list))
            and before
            and not kept_by_user
        ):
            del new[key]


def _commit(doc: JsonDoc, target: bytes | None) -> None:
    if target == doc.raw:
        return
    path = doc.path
    if target is None:
        path.unlink()
        return
    bak = backup_path(path)
    if doc.raw is not None and not bak.exists():
        _write_atomic(bak, doc.raw, _mode_of(path))
    _write_atomic(path, target, _mode_of(path) if doc.exists else _NEW_FILE_MODE)


def _file_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return _NEW_FILE_MODE


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    # Follow a symlink (dotfile managers link these files): replace the target, keep the link.
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, data, mode)


def write_bytes_atomic(path: Path, data: bytes, mode: int = _NEW_FILE_MODE) -> None:
    """Atomic write for files we own outright (skill copies)."""
    _write_atomic(path, data, mode)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclude other memself processes editing the same file.

    The lock lives in a private temp folder, not beside the file: a lock file left in
    ``~/.claude`` would be a change to the user's folder that uninstall could not undo.
    """
    from memself.platform import files, locks, runtime

    folder = Path(tempfile.gettempdir()) / f"memself-locks-{runtime.user_tag()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    digest = hashlib.sha256(os.path.realpath(path).encode("utf-8")).hexdigest()[:32]
    fd = os.open(folder / f"{digest}.lock", os.O_RDWR | os.O_CREAT | files.BINARY, 0o600)
    try:
        locks.exclusive(fd)
        yield
    finally:
        os.close(fd)
