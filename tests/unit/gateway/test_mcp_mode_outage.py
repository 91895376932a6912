"""``tools/list`` on ``/mcp`` while the caller's key cannot be checked (Postgres down) is a
JSON-RPC error naming the outage, not the SDK's bare ``-32603`` "internal error"."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import psycopg
import pytest
from mcp import types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from services.gateway.mcp.direct import Listeners
from services.gateway.mcp.errors import tool_errors
from services.gateway.mcp.modes import register
from shared.auth.principal import Principal


async def postgres_down(request: object) -> Principal:
    with tool_errors():  # as the gateway's principal_for converts what the key lookup raised
        raise psycopg.OperationalError("connection refused")


def test_tools_list_with_postgres_down_names_the_outage() -> None:
    server = MCPServer(name="t")

    @server.tool(name="noop")
    def noop() -> str:
        return "ok"

    register(
        server,
        get_state=lambda: cast(Any, None),
        principal_for=postgres_down,
        listeners=Listeners(),
    )
    handler = server._lowlevel_server.get_request_handler("tools/list")
    assert handler is not None
    ctx = cast(Any, type("Ctx", (), {"request": None})())
    with pytest.raises(MCPError) as raised:
        asyncio.run(handler.handler(ctx, None))
    error = raised.value.error
    assert error.code == types.INTERNAL_ERROR
    assert "postgres is unavailable" in error.message
    assert "could not resolve the caller's key" in error.message
    assert isinstance(error.data, dict) and error.data["type"] == "unavailable"
    assert error.data["details"] == {"dependency": "postgres"}
