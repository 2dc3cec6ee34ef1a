"""``memself side-run`` (the detached judge) and ``memself mcp`` (the MCP server)."""

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


@main.command("mcp")
@click.option("--agent", required=True, help="宿主客户端（claude、cursor、codebuddy、workbuddy）")
def mcp_command(agent: str) -> None:
    """以 MCP（stdio）方式提供记忆工具，由客户端启动。"""
    from memself.hosts import HOSTS
    from memself.mcp_server import serve

    if agent not in HOSTS:
        raise click.BadParameter(f"未知客户端「{agent}」，可用：{'、'.join(HOSTS)}", param_hint="--agent")
    serve(agent)
