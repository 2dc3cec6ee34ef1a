"""``memself side-run JOB_FILE``: the detached judge process the prompt hook spawns (hidden)."""

from __future__ import annotations

from pathlib import Path

import click

from memself.cli.app import main


@main.command("side-run", hidden=True)
@click.argument("job_file", type=click.Path(path_type=Path, dir_okay=False))
def side_run(job_file: Path) -> None:
    """旁路判别（由 hook 在后台启动）。"""
    from memself.judge.worker import run_detached

    run_detached(job_file)
