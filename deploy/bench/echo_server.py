"""The benchmarks' MCP server (stdio): ``echo`` returns its argument, the cheapest tool there is.

`bench e2e` and `bench cache` configure it through an ``mcpServers`` file
(:func:`write_config`), as an operator configures any server, so their numbers include one
real MCP round trip over stdio. Run it alone with ``python -m deploy.bench.echo_server``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

SERVER = "bench"
# The checkout holding this file: the server runs from it (a stdio server gets a minimal
# environment, no PYTHONPATH, so `-m` must find this checkout's `deploy` from its cwd).
ROOT = Path(__file__).resolve().parents[2]

server = MCPServer("agentcards-bench", instructions="Benchmark tools: echo returns its argument.")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(n: int) -> dict[str, int]:
    """Return the argument as given: ``{"n": n}``."""
    return {"n": n}


def write_config(path: Path, *, agentcards: dict[str, Any] | None = None) -> Path:
    """Write an ``mcpServers`` file at ``path`` serving this module as server ``bench``;
    ``agentcards`` is the entry's ``"agentcards"`` block (e.g. the cache policy)."""
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-m", "deploy.bench.echo_server"],
        "cwd": str(ROOT),
    }
    if agentcards is not None:
        entry["agentcards"] = agentcards
    path.write_text(json.dumps({"mcpServers": {SERVER: entry}}))
    return path


if __name__ == "__main__":
    server.run()
