"""AgentCards as an MCP server, driven by the official SDK client: /mcp over HTTP and `agentcards mcp` over stdio."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import settings_env
from tests.integration.e2e.conftest import E2EStack

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EXPECTED_TOOLS = {
    "execute_code",
    "search_tools",
    "get_execution",
    "search_capabilities",
    "execute_capability",
}
CODE = """
progress("adding", done=0, total=1)
total = await mcp.example.add(a=args["a"], b=args["b"])
progress("added", done=1, total=1)
return {"total": total}
"""


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content:
        data: dict[str, Any] = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return dict(json.loads(result.content[0].text))


async def _exercise(session: ClientSession) -> dict[str, Any]:
    await session.initialize()
    tools = (await session.list_tools()).tools
    names = {t.name for t in tools}
    assert names >= EXPECTED_TOOLS
    assert all(NAME.match(n) for n in names)
    described = next(t for t in tools if t.name == "execute_code").description or ""
    assert "mcp.<server>.<tool>" in described and "return" in described and "args" in described

    found = _structured(await session.call_tool("search_tools", {"query": "add two numbers"}))
    assert "example:add" in [t["id"] for t in found["hits"][:5]]

    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    ran = _structured(
        await session.call_tool(
            "execute_code",
            {"code": CODE, "args": {"a": 20, "b": 22}, "intent": "add two numbers over MCP"},
            progress_callback=on_progress,
        )
    )
    assert ran["status"] == "succeeded" and ran["result"] == {"total": 42}
    assert [m for _, m in progress] == ["adding", "added"]

    fetched = _structured(await session.call_tool("get_execution", {"execution_id": ran["id"]}))
    assert fetched["id"] == ran["id"] and fetched["result"] == {"total": 42}

    bad = await session.call_tool("execute_code", {"code": "return 1", "tools": ["nope:nothing"]})
    assert bad.is_error
    assert "nope:nothing" in bad.content[0].text
    return ran


async def test_streamable_http_client_lists_searches_and_executes(e2e: E2EStack) -> None:
    async with (
        streamable_http_client(f"{e2e.gateway_url}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        ran = await _exercise(session)
    assert ran["tool_calls"][0]["tool"] == "example:add"


async def test_stdio_server_for_desktop_clients(e2e: E2EStack) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "deploy.cli.main", "mcp"],
        env=settings_env(e2e.settings),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await _exercise(session)
