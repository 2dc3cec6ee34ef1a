"""``memself share ID``: copy one memory into the repository's ``.memself/`` for its team."""

from __future__ import annotations

import click

from memself.cli.app import main
from memself.cli.scope import workspace_option


@main.command("share")
@click.argument("mem_id")
@workspace_option("共享到这个目录所在的仓库（默认：当前目录所在的仓库）")
def share_cmd(mem_id: str, workspace_dir: str | None) -> None:
    """把一条记忆写进仓库的 .memself/，作为团队记忆；不会替你提交，请检查后自己 git add、git commit。"""
    from memself.paths import DataPaths
    from memself.share import share
    from memself.store.memory_store import MemoryStore
    from memself.text.messages import share_lines
    from memself.workspace_args import current_workspace, directory_workspace

    workspace = current_workspace() if workspace_dir is None else directory_workspace(workspace_dir)
    shared = share(MemoryStore(DataPaths.default()), mem_id, workspace)
    lines = share_lines(
        shared.root, shared.relative, shared.memory.text, shared.already, shared.unreadable_lines
    )
    click.echo("\n".join(lines))
