"""A workspace named by a person: a directory given on the command line or in an MCP call, or
the working directory of the process (the CLI's, or the MCP server's, which hosts start in the
project). The errors are for the user; ``memself.store.workspaces`` stays free of them (the hook uses it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from memself.errors import InvalidInput
from memself.store.workspaces import Workspace, workspace_for_key, workspace_of


def directory_workspace(directory: str, known: Iterable[str] = ()) -> Workspace:
    """The workspace of ``directory``. A directory that no longer exists is accepted only when it
    is exactly the key of a workspace in ``known`` (memories of a repository that was removed can
    still be looked at); anything else that does not exist is a typo, and refused."""
    if not directory.strip():
        raise InvalidInput("项目目录为空")
    path = os.path.abspath(os.path.expanduser(directory))
    if not os.path.isdir(path):
        found = workspace_for_key(path)
        if found is not None and found.key in set(known):
            return found
        raise InvalidInput(f"目录不存在：{directory}")
    # The real path: hosts report the process's working directory, which has its links resolved.
    workspace = workspace_of(os.path.realpath(path))
    if workspace is None:
        raise InvalidInput("文件系统根目录不能作为项目范围，请指定项目所在的目录")
    return workspace


def current_workspace() -> Workspace | None:
    """The workspace of the working directory; None when there is none (the root, or a working
    directory that was removed)."""
    try:
        here = os.getcwd()
    except OSError:
        return None
    return workspace_of(here)
