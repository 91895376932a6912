"""`bench input-required`'s MCP server (stdio): ``ask`` elicits a name from the client and
returns it. Run it alone with ``python -m deploy.bench.ask_server``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

SERVER = "asker"
ROOT = Path(__file__).resolve().parents[2]  # stdio servers run from this checkout (see echo_server)

server = MCPServer("agentcards-bench-ask")


class Name(BaseModel):
    """What ``ask`` asks for."""

    name: str


@server.tool()
async def ask(question: str, ctx: Context) -> dict[str, object]:
    """Elicit ``question``; the action and the name given."""
    answer = await ctx.elicit(question, Name)
    return {
        "action": answer.action,
        "name": answer.data.name if answer.action == "accept" else None,
    }


def write_config(path: Path) -> Path:
    """An ``mcpServers`` file at ``path`` serving this module as server ``asker``."""
    # ``ctx.elicit`` asks mid-call, which an SDK server can do only at 2025-11-25: spoken to so
    # (docs/mcp-input-required.md).
    entry = {
        "command": sys.executable,
        "args": ["-m", "deploy.bench.ask_server"],
        "cwd": str(ROOT),
        "protocol": "2025-11-25",
    }
    path.write_text(json.dumps({"mcpServers": {SERVER: entry}}))
    return path


if __name__ == "__main__":
    server.run()
