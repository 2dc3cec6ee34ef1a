"""Team memories a repository carries: ``.memself/rule.jsonl`` and ``.memself/project.jsonl`` at
its root, one record a line in the original's format, for everyone who works in it.

They are the workspace's memories, read-only: never written, rewarded or decayed here, and seen
only in that repository. The repository is someone else's text, so reading it is bounded and
suspicious: only a regular file inside a real ``.memself`` folder of a repository root (no
symbolic link, which could point at any file of the user's), at most ``MAX_BYTES`` of it and
``MAX_MEMORIES`` records; a line that is not a usable memory is skipped and counted in one log
line per file. The text is shown as any memory's is (``memself.text.messages.inert``).

Standard library only: session start reads it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable

from memself.errors import MemselfError
from memself.platform import files as platform_files
from memself.store.records import GROUPS, Memory, check_text
from memself.store.workspaces import display_name

TEAM_DIR = ".memself"
MAX_BYTES = 256 * 1024
MAX_MEMORIES = 200
ID_PREFIX = "team:"  # no id of the user's own store can collide with one of these

# (event, fields): where a skipped line or an unreadable file is reported.
Report = Callable[..., None]


def is_repository(root: str) -> bool:
    """Whether ``root`` is a git repository's root (its ``.git`` is there): the only place a
    team's memories are read from or shared into."""
    return bool(root) and os.path.isabs(root) and os.path.lexists(os.path.join(root, ".git"))


def team_memories(workspace: str, group: str, report: Report | None = None) -> list[Memory]:
    """The active ``group`` memories the repository at ``workspace`` carries, in file order;
    [] when it is not a repository or carries none."""
    if group not in GROUPS or not workspace or not os.path.isabs(workspace):
        return []
    if not is_repository(workspace):
        return []  # a plain directory is nobody's team
    folder = os.path.join(workspace, TEAM_DIR)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
    except OSError:
        return []
    name = f"{TEAM_DIR}/{group}.jsonl"
    data = _read_bounded(os.path.join(folder, f"{group}.jsonl"))
    if data is None:
        if report is not None and os.path.lexists(os.path.join(folder, f"{group}.jsonl")):
            report("team-file-unreadable", workspace=workspace, file=name)
        return []
    if len(data) > MAX_BYTES:
        data = data[: data.rfind(b"\n", 0, MAX_BYTES) + 1]
        if report is not None:
            report("team-file-truncated", workspace=workspace, file=name, limit=MAX_BYTES)
    found: list[Memory] = []
    skipped: list[int] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        memory = _parse(line, group)
        if memory is None:
            skipped.append(number)
            continue
        if len(found) >= MAX_MEMORIES:
            if report is not None:
                report("team-file-truncated", workspace=workspace, file=name, limit=MAX_MEMORIES)
            break
        memory.id = ID_PREFIX + memory.id
        memory.workspace, memory.workspaceName = workspace, display_name(workspace)
        if memory.active:
            found.append(memory)
    if skipped and report is not None:
        report("team-lines-skipped", workspace=workspace, file=name, lines=skipped[:20], count=len(skipped))
    return found


def _read_bounded(path: str) -> bytes | None:
    """At most ``MAX_BYTES`` + 1 bytes of a regular file at ``path``, never through a link or
    from a pipe that would block; None when it is none of that."""
    flags = os.O_RDONLY | platform_files.CLOEXEC | platform_files.NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
    try:
        if os.path.islink(path):
            return None
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_line(line: bytes, group: str) -> Memory | None:
    """One line of a team file as the reader takes it (its id not yet prefixed), or None when
    the reader skips it."""
    return _parse(line, group)


def _parse(line: bytes, group: str) -> Memory | None:
    try:
        raw = json.loads(line.decode("utf-8"))
        memory = Memory.from_json(raw, group)
        if memory is None or memory.category != group:
            return None
        memory.text = check_text(memory.text)
    except (ValueError, TypeError, RecursionError, MemselfError):
        return None
    return memory
