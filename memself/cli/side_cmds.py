"""``memself side-run`` (the detached judge) and ``memself mcp`` (the MCP server)."""

from __future__ import annotations

from pathlib import Path

import click

from memself.cli.app import main


@main.command("side-run", hidden=True)
@click.argument("job_file", type=click.Path(path_type=Path, dir_okay=False))
def side_run(job_file: Path) -> None:
    """旁路判别（由 hook 在后台启动）。"""
    from memself.side.judge import run_detached

    run_detached(job_file)
