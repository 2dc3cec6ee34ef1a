"""Workspaces on the command line: the scope a command writes to or looks from, given as a
directory (``--workspace DIR``, ``--global``; resolved by ``memself.workspace_args``), and a
memory's scope in JSON output.

JSON always carries ``workspace`` and ``workspaceName``: the key and name of the memory's
workspace, both null for a global memory (the store omits them for a global memory, so that the
original plugin's records stay as they are; a reader of our output should not have to know that).
"""

from __future__ import annotations

import os
from typing import Any

import click

from memself.errors import InvalidInput
from memself.store.records import Memory
from memself.store.workspaces import Workspace
from memself.workspace_args import current_workspace, directory_workspace

WORKSPACE_HELP = "项目目录（映射到它所在仓库的根目录）"


def workspace_option(help_text: str) -> Any:
    return click.option("--workspace", "workspace_dir", metavar="DIR", default=None, help=help_text)


def global_option(help_text: str) -> Any:
    return click.option("--global", "to_global", is_flag=True, help=help_text)


def target_scope(workspace_dir: str | None, to_global: bool, default_here: bool) -> Workspace | None:
    """Where a new or moved memory goes: ``--workspace DIR``, ``--global`` (None), or the default:
    the working directory's workspace when ``default_here``, else global."""
    if workspace_dir is not None and to_global:
        raise InvalidInput("--workspace 和 --global 只能选一个")
    if to_global:
        return None
    if workspace_dir is not None:
        return directory_workspace(workspace_dir)
    return current_workspace() if default_here else None


def scope_json(memory: Memory) -> dict[str, str | None]:
    return {"workspace": memory.workspace or None, "workspaceName": memory.workspaceName or None}


def memory_json(memory: Memory) -> dict[str, Any]:
    """A memory's record with its scope always present (null: global) and its origin: ``local``
    (the user's store) or ``team`` (a repository's ``.memself/``, named in ``teamFile``)."""
    from memself.text.messages import is_team_memory, team_file_of

    if is_team_memory(memory):
        origin = {"origin": "team", "teamFile": os.path.join(memory.workspace, team_file_of(memory))}
        return {**memory.to_json(), **scope_json(memory), **origin}
    return {**memory.to_json(), **scope_json(memory), "origin": "local"}
