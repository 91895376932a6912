"""`bench input-required`'s MCP server (stdio): ``ask`` elicits a name from the client and
returns it. Run it alone with ``python -m deploy.bench.ask_server``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import is_version_at_least
from pydantic import BaseModel

SERVER = "asker"
STATELESS_SERVER = "asker26"
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


@server.tool()
async def ask_stateless(question: str, ctx: Context) -> dict[str, object] | InputRequiredResult:
    """``ask`` the 2026-07-28 way: an ``InputRequiredResult`` keyed ``name`` until the retry
    carries the answer (a 2025-11-25 session is asked mid-call, as by ``ask``)."""
    if not is_version_at_least(ctx.request_context.protocol_version, "2026-07-28"):
        return await ask(question, ctx)
    answer = (ctx.input_responses or {}).get("name")
    if not isinstance(answer, ElicitResult):
        schema = Name.model_json_schema()
        request = ElicitRequest(
            params=ElicitRequestFormParams(message=question, requested_schema=schema)
        )
        return InputRequiredResult(input_requests={"name": request})
    name = (answer.content or {}).get("name") if answer.action == "accept" else None
    return {"action": answer.action, "name": name}


def write_config(path: Path) -> Path:
    """An ``mcpServers`` file at ``path`` serving this module twice: as ``asker`` spoken to at
    2025-11-25 (``ask``'s ``ctx.elicit`` asks mid-call, which an SDK server can do only at
    that revision; docs/mcp-input-required.md), and as ``asker26`` at the revision it
    negotiates (2026-07-28: ``ask_stateless`` asks with an InputRequiredResult)."""
    entry = {"command": sys.executable, "args": ["-m", "deploy.bench.ask_server"], "cwd": str(ROOT)}
    servers = {SERVER: {**entry, "protocol": "2025-11-25"}, STATELESS_SERVER: entry}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


if __name__ == "__main__":
    server.run()
