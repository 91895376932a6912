"""`bench direct`'s slow MCP server (stdio): ``pause`` answers after the seconds it is given.

A long call in one session must not hold up the calls of the others; this is that call.
Run it alone with ``python -m deploy.bench.pause_server``.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentcards-bench-pause", instructions="pause answers after `seconds`.")


@server.tool()
async def pause(seconds: float) -> dict[str, float]:
    """Wait ``seconds``, then return them: ``{"paused": seconds}``."""
    await asyncio.sleep(seconds)
    return {"paused": seconds}


if __name__ == "__main__":
    server.run()
