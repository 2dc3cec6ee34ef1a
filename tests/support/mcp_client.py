"""A real MCP stdio session with the registered ``memself mcp --agent HOST``, as a host's client
opens one."""

from __future__ import annotations

import os

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memself.install.entries import mcp_command


def server_params(host: str, cwd: str | None = None) -> StdioServerParameters:
    """The server as a host starts it: ``cwd`` is the project it was started in."""
    env = {k: os.environ[k] for k in ("HOME", "MEMSELF_HOME", "PATH") if k in os.environ}
    command = mcp_command(host)  # what the installers register
    return StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)


async def session_calls(
    host: str, calls: list[tuple[str, dict]], cwd: str | None = None
) -> tuple[object, list, list]:
    params = server_params(host, cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, args) for name, args in calls]
    return init, listed.tools, results


def text_of(result) -> str:
    return "".join(c.text for c in result.content)


def run(host: str, calls: list[tuple[str, dict]], cwd: str | None = None):
    return anyio.run(session_calls, host, calls, cwd)
