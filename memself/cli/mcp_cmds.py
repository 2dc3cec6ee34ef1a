"""``memself mcp --agent HOST``: the MCP server a host starts over stdio (``memself.mcp_server``)."""

from __future__ import annotations

import click

from memself.cli.app import main
from memself.hosts import HOSTS


# ``--agent`` is the flag's name in every host's registered MCP command: it stays.
@main.command("mcp", hidden=True)
@click.option("--agent", "host", required=True, help=f"宿主客户端（{'、'.join(HOSTS)}）")
def mcp_cmd(host: str) -> None:
    """以 MCP（stdio）方式提供记忆工具，由客户端启动。"""
    from memself.mcp_server import serve

    if host not in HOSTS:
        raise click.BadParameter(f"未知客户端「{host}」，可用：{'、'.join(HOSTS)}", param_hint="--agent")
    serve(host)
