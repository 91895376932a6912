"""A real MCP server (stdio, the mcp SDK) for the policy tests: it appends every call it
receives, name and arguments, to ``RECORDING_FILE`` (one JSON line each), so a test sees
exactly what reached a server and what never did.

- ``lookup`` is annotated read-only and idempotent;
- ``pay`` carries no annotations: MCP's defaults make it destructive and open-world;
- ``rec://notes/{name}`` is a resource whose reads are recorded as ``read``;
- the prompt ``greeting`` is recorded as ``prompt``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

FILE = Path(os.environ["RECORDING_FILE"])
server = MCPServer("recording")


def _record(tool: str, args: dict[str, Any]) -> None:
    with FILE.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def lookup(key: str) -> str:
    """Read a value by key."""
    _record("lookup", {"key": key})
    return f"value of {key}"


@server.tool()
def pay(amount: float, to: str, memo: str | None = None) -> str:
    """Pay ``amount`` to ``to`` (with a ``memo``: recorded too)."""
    _record("pay", {"amount": amount, "to": to, **({"memo": memo} if memo is not None else {})})
    return f"paid {amount} to {to}"


@server.resource("rec://notes/{name}")
def note(name: str) -> str:
    """A note by name."""
    _record("read", {"name": name})
    return f"note {name}"


@server.prompt()
def greeting(name: str) -> str:
    """A greeting for ``name``."""
    _record("prompt", {"name": name})
    return f"Say hello to {name}."


if __name__ == "__main__":
    server.run()
