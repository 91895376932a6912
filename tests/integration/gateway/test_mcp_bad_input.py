"""Bad input to the gateway's MCP tools: a structured tool error naming the field, nothing recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from services.gateway.mcp.server import build_mcp_server
from services.gateway.state import GatewayState
from shared.config import Settings
from shared.db import connect
from shared.inputs import BODY_DEPTH
from tests.stack import tool_error


@asynccontextmanager
async def mcp_client(settings: Settings) -> AsyncIterator[Client]:
    """The gateway's MCP server, in process, over this test's real Postgres and Redis.

    Entered inside the test (not a fixture): the client's task group must exit in the task
    that opened it.
    """
    state = GatewayState.open(settings)
    try:
        async with Client(build_mcp_server(lambda: state)) as client:
            yield client
    finally:
        await state.close()


def _executions(settings: Settings) -> int:
    with connect(settings.database_url or "") as conn:
        row = conn.execute("SELECT count(*) AS n FROM executions").fetchone()
    assert row is not None
    return int(row["n"])


async def _tool_error(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    error = tool_error(await client.call_tool(tool, arguments))
    assert error["type"] == "validation_error"
    return error


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("execute_code", {"code": "return 1\x00"}, "code"),
        ("execute_code", {"code": "return 1", "intent": "\x00"}, "intent"),
        ("execute_code", {"code": "return 1", "args": {"a": {"b": "\x00"}}}, "args.a.b"),
        ("execute_code", {"code": "return 1", "args": {"a": {"\x00": 1}}}, "args.a.\\u0000"),
        ("search_tools", {"query": "add\x00 numbers"}, "query"),
        ("search_tools", {"query": "add", "context_tools": ["\x00"]}, "context_tools.0"),
        ("search_capabilities", {"intent": "add\x00"}, "intent"),
        ("execute_capability", {"capability_id": "x", "args": {"k": "\x00"}}, "args.k"),
    ],
)
async def test_nul_is_a_structured_tool_error_naming_the_field(
    settings: Settings, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with mcp_client(settings) as client:
        error = await _tool_error(client, tool, arguments)
    assert [d["field"] for d in error["details"]] == [field]
    assert "NUL" in error["message"]
    assert _executions(settings) == 0


@pytest.mark.parametrize("query", ["", " ", "\t\n  "])
async def test_a_blank_tool_search_is_refused_naming_the_query(
    settings: Settings, query: str
) -> None:
    async with mcp_client(settings) as client:
        error = await _tool_error(client, "search_tools", {"query": query})
    assert [d["field"] for d in error["details"]] == ["query"]


async def test_nul_in_a_capability_id_is_refused(settings: Settings) -> None:
    async with mcp_client(settings) as client:
        error = await _tool_error(client, "execute_capability", {"capability_id": "a\x00b"})
    assert "NUL" in error["message"]


def test_a_deeply_nested_mcp_message_is_refused_before_parsing(
    client: TestClient, settings: Settings
) -> None:
    levels = 100_000
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code",'
        b'"arguments":{"code":"return 1","args":' + b"[" * levels + b"]" * levels + b"}}}"
    )
    response = client.post(
        "/mcp",
        content=body,
        headers={"content-type": "application/json", "accept": "application/json"},
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "nesting_limit" and error["details"]["limit"] == BODY_DEPTH
    assert _executions(settings) == 0
