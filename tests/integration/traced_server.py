"""A downstream MCP server (stdio) for the tracing tests: it records the W3C trace context it
receives in each request's ``params._meta`` (SEP-414) to ``TRACED_SERVER_LOG``, and traces
itself when an OTLP endpoint is configured (the MCP SDK's server span continues the caller's
trace), as ``traced-test-server``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from shared import telemetry

server = MCPServer("traced-test-server")
LOG = Path(os.environ.get("TRACED_SERVER_LOG", "/dev/null"))


@server.tool()
async def lookup(key: str, ctx: Context) -> dict[str, Any]:
    """Echo ``key`` back (a result holding the argument's value)."""
    meta = dict(ctx.request_context.meta or {})
    with LOG.open("a") as log:
        seen = {"traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate")}
        log.write(json.dumps(seen) + "\n")
    return {"key": key, "echo": f"looked up {key}"}


if __name__ == "__main__":
    telemetry.setup("traced-test-server")
    server.run()
