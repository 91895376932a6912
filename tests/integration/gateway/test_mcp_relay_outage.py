"""Redis or Postgres failing under MCP tools: our `unavailable` error, and a run still goes out."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from mcp import Client

from services.gateway.mcp.server import build_mcp_server
from services.gateway.state import GatewayState
from shared.config import Settings
from shared.db import connect, make_pool
from shared.queues import Queue
from tests.stack import tool_error


async def test_redis_failing_for_the_relay_and_the_wait_strands_nothing(
    settings: Settings,
) -> None:
    # The gateway's async Redis client (the relay's advertisement, the wait's events)
    # points at a closed port; the broker and Postgres work.
    state = GatewayState.open(settings)
    state.aredis = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        async with Client(build_mcp_server(lambda: state)) as client:
            result = await client.call_tool("execute_code", {"code": "return 1"})
    finally:
        await state.close()
    error = tool_error(result)
    assert error["type"] == "unavailable" and error["details"] == {"dependency": "redis"}
    assert "retry after" in error["message"] and "idempotency_key" in error["message"]
    # The run was recorded and its task sent before the wait failed: a worker runs it,
    # nothing stays queued forever.
    with connect(settings.database_url or "") as conn:
        rows = conn.execute("SELECT id::text, status FROM executions").fetchall()
    assert [r["status"] for r in rows] == ["queued"]
    queued = redis.Redis.from_url(settings.redis_url or "").lrange(Queue.EXECUTIONS, 0, -1)
    assert any(rows[0]["id"].encode() in message for message in queued)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_execution", {"execution_id": "00000000-0000-0000-0000-000000000000"}),
        ("search_tools", {"query": "add two numbers"}),
    ],
)
async def test_postgres_unreachable_is_the_unavailable_error_in_every_mcp_tool(
    settings: Settings, tool: str, arguments: dict[str, Any]
) -> None:
    state = GatewayState.open(settings)
    healthy, state.pool = state.pool, make_pool("postgresql://nobody@127.0.0.1:1/none", timeout=0.5)
    try:
        async with Client(build_mcp_server(lambda: state)) as client:
            result = await client.call_tool(tool, arguments)
    finally:
        state.pool.close()
        state.pool = healthy
        await state.close()
    error = tool_error(result)
    assert error["type"] == "unavailable" and error["details"] == {"dependency": "postgres"}
