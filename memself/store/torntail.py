"""A killed writer's torn last line, moved aside by the next writer.

A new memory is one line appended in one ``write``, but Linux stops a write to a file part way
(at a page boundary) once SIGKILL is pending, and hosts kill a hook that outlives its time
budget. What is left is the start of a line with no newline. It was never acknowledged, so no
memory goes with it; left in place, though, it would be a quarantined line, and the daily
maintenance refuses to rewrite a file holding one until the user edits it by hand.

So the next writer, holding the write lock (no append can be in flight), moves such a tail byte
for byte to ``torn-lines.txt`` beside the store and cuts it from the file. Only a line that breaks
where its bytes run out is taken for torn: a last line that lacks only its newline (a hand edit
in an editor that writes none) or has a mistake in its middle stays where it is, and the append
after it adds the newline first (``memself.atomic.append_lines``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from memself.atomic import append_lines, real_target
from memself.errors import MemselfError
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import files
from memself.store.recordlines import MAX_LINE_BYTES

_CHUNK = 64 * 1024
_LITERALS = ("true", "false", "null")
_NUMBER_CHARS = set("-+.0123456789eE")


def move_torn_tails(paths: DataPaths) -> int:
    """Under the write lock: move every store file's torn last line aside; how many were moved."""
    moved = 0
    for path in (paths.group_file("rule"), paths.group_file("project"), paths.trash):
        try:
            size = _move_tail(paths, path)
        except (OSError, MemselfError) as exc:
            # The tail stays a quarantined line, as it would without this step; the write goes on
            # (MemselfError: torn-lines.txt is a link memself cannot write through).
            log(paths, "torn-line-kept", file=path.name, error=str(exc))
            continue
        if size:
            moved += 1
            log(paths, "torn-line-moved", file=path.name, bytes=size, to=paths.torn_lines.name)
    return moved


def _move_tail(paths: DataPaths, path: Path) -> int:
    """The torn tail's size once moved aside, or 0 when ``path`` ends in a whole line."""
    target = real_target(path)
    # Read first: almost every write finds nothing torn, and a file memself may not write (a
    # read-only trash) is then only read, not refused on every write.
    try:
        fd = os.open(target, os.O_RDONLY | files.BINARY | files.CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if not size or files.read_at(fd, 1, size - 1) == b"\n":
            return 0
        start = _last_line_start(fd, size)
        tail = files.read_at(fd, size - start, start)
    finally:
        os.close(fd)
    if not _cut_short(tail):
        return 0
    fd = os.open(target, os.O_RDWR | files.BINARY | files.CLOEXEC)
    try:
        # Appends wait for the write lock, but a hand edit between the two opens may not: cut only
        # the tail that was read.
        if os.fstat(fd).st_size != size:
            return 0
        # Kept first, cut second: a crash in between keeps the tail twice, never nowhere.
        append_lines(paths.torn_lines, tail + b"\n")
        os.ftruncate(fd, start)
        os.fsync(fd)
        return len(tail)
    finally:
        os.close(fd)


def _last_line_start(fd: int, size: int) -> int:
    end = size
    while end > 0:
        begin = max(0, end - _CHUNK)
        newline = files.read_at(fd, end - begin, begin).rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        end = begin
    return 0


def _cut_short(line: bytes) -> bool:
    """Whether ``line`` is the start of a record whose write stopped part way: it begins as every
    stored line does and breaks only where its bytes run out (inside a string, a number, a
    literal, a UTF-8 character, or before a closing brace). A line with a mistake in the middle
    (a hand edit's stray comma) is no torn write: it stays a quarantined line the user is shown."""
    if len(line) > MAX_LINE_BYTES or not line.lstrip().startswith(b"{"):
        return False
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end != len(line) or exc.reason != "unexpected end of data":
            return False
        text = line[: exc.start].decode("utf-8", "replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string"):
            return True
        rest = text[exc.pos :].rstrip()
        return not rest or any(w.startswith(rest) for w in _LITERALS) or set(rest) <= _NUMBER_CHARS
    except (ValueError, RecursionError):
        return False
    return False  # whole JSON: a record the reader takes, or a line it quarantines as it should
