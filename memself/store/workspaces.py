"""Which workspace a directory belongs to: the repository root above it, else the directory.

A workspace is named by a key, the absolute path of that root, and a display name, its last
component. A memory with a workspace is recalled and injected only there; one without is global.
The root is found by walking up to a ``.git`` entry without running git: the hook must answer in
milliseconds, and git may not be installed. A linked worktree (``.git`` is a file pointing into
``<main>/.git/worktrees/``) belongs to its main repository, so its checkouts share their facts;
a submodule (pointing into ``.git/modules/``) is a repository of its own.

A ``.git`` file is the opened directory's own say, and archives and packages carry them: one
naming another repository's worktrees would hand that repository's memories to whatever was
unpacked. So a worktree pointer is believed only as git leaves a real one: its administrative
directory exists and that directory's ``gitdir`` file points back at this very ``.git`` file.
Anything else with a ``gitdir:`` line is a repository of its own, as a submodule is.

Standard library only: the hook imports it.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

_WORKTREES = os.sep + os.path.join(".git", "worktrees") + os.sep
# A .git file is one short line; anything longer is not a gitdir pointer.
_GITFILE_LIMIT = 4096


class Workspace(NamedTuple):
    key: str  # the root's absolute path: stable while the repository stays where it is
    name: str  # what the user sees


def workspace_of(directory: str) -> Workspace | None:
    """The workspace of ``directory`` (absolute, need not exist), or None when there is none to
    name: an empty or relative path, or the filesystem root."""
    if not directory or not os.path.isabs(directory):
        return None
    start = os.path.normpath(directory)
    current = start
    while True:
        root = _repository_root(current)
        if root:
            return _named(root)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return _named(start)


def workspace_for_key(key: str) -> Workspace | None:
    """A workspace from a stored key (records keep the name too; this is for keys alone)."""
    return _for_key(key) if key else None


@functools.lru_cache(maxsize=1024)
def _for_key(key: str) -> Workspace | None:
    # Every record of a group file names one of a few keys: each is normalised once. Bounded:
    # keys come from records and the prompts' workspaces, which are not.
    return _named(key) if os.path.isabs(key) else None


def display_name(key: str) -> str:
    return os.path.basename(key.rstrip(os.sep)) or key


def _named(root: str) -> Workspace | None:
    root = os.path.normpath(root)
    if root == os.sep:
        return None
    return Workspace(root, display_name(root))


def _repository_root(directory: str) -> str:
    """``directory`` when it holds a repository's ``.git``; its main repository's root when it is
    a linked worktree; "" otherwise."""
    marker = os.path.join(directory, ".git")
    try:
        if os.path.isdir(marker):
            return directory
        if not os.path.isfile(marker):
            return ""
        with open(marker, encoding="utf-8", errors="replace") as handle:
            line = handle.read(_GITFILE_LIMIT).strip()
    except OSError:
        return ""
    if not line.startswith("gitdir:"):
        return ""
    gitdir = os.path.normpath(os.path.join(directory, line[len("gitdir:") :].strip()))
    main, found, _ = gitdir.partition(_WORKTREES)
    if found and os.path.isabs(main) and _points_back(gitdir, marker):
        return main
    return directory


def _points_back(gitdir: str, marker: str) -> bool:
    """Whether the worktree administrative directory ``gitdir`` names ``marker`` (this ``.git``
    file) in its own ``gitdir`` file, as ``git worktree add`` writes it: absolute, or relative
    to ``gitdir`` (``worktree.useRelativePaths``). Compared as files, so spellings and links do
    not matter."""
    try:
        with open(os.path.join(gitdir, "gitdir"), encoding="utf-8", errors="replace") as handle:
            back = handle.read(_GITFILE_LIMIT).strip()
        # Joined, not normalised: ".." is resolved by the filesystem, from the real directory.
        return bool(back) and os.path.samefile(os.path.join(gitdir, back), marker)
    except (OSError, ValueError):
        return False
