"""AgentCards as an MCP server, driven by the official SDK client: /mcp over HTTP and `agentcards mcp` over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

import anyio
import httpx
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged

from shared.capabilities.skills import EXTENSION_ID
from tests.stack import E2EStack, settings_env

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
    async with stdio_client(_stdio(e2e)) as (read, write), ClientSession(read, write) as session:
        await _exercise(session)


def _stdio(e2e: E2EStack) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "deploy.cli.main", "mcp"],
        env=settings_env(e2e.settings),
    )


async def test_stdio_speaks_both_revisions(e2e: E2EStack) -> None:
    """`agentcards mcp` at 2026-07-28 (the SDK client's default, ``server/discover``): caching
    hints on lists, the same tools in the same order as a 2025-11-25 session, and a tool call
    carried by per-request ``_meta`` alone."""
    async with Client(_stdio(e2e)) as modern:
        assert modern.protocol_version == "2026-07-28"
        assert modern.server_info is not None and modern.server_info.name == "agentcards"
        listed = await modern.list_tools(cache_mode="refresh")
        assert listed.cache_scope == "private" and listed.ttl_ms == 60_000
        again = await modern.list_tools(cache_mode="refresh")
        modern_names = [tool.name for tool in listed.tools]
        assert modern_names == [tool.name for tool in again.tools]
        assert set(modern_names) >= EXPECTED_TOOLS
        ran = _structured(
            await modern.call_tool(
                "execute_code", {"code": CODE, "args": {"a": 1, "b": 2}, "learn": False}
            )
        )
        assert ran["status"] == "succeeded" and ran["result"] == {"total": 3}
    async with Client(_stdio(e2e), mode="legacy") as legacy:
        assert legacy.protocol_version == "2025-11-25"
        # The skills extension, which 2025-11-25 capabilities can only carry as experimental.
        assert (legacy.server_capabilities.experimental or {}).get(EXTENSION_ID) == {
            "directoryRead": True
        }
        assert [tool.name for tool in (await legacy.list_tools()).tools] == modern_names


async def test_stdio_answers_a_request_by_its_own_meta(e2e: E2EStack) -> None:
    """2026-07-28 is stateless: a bare JSON-RPC line with the revision in its ``_meta`` is
    answered with no handshake; a revision the server does not speak is refused by name."""
    params = _stdio(e2e)
    proc = await asyncio.create_subprocess_exec(
        params.command, *params.args, env=params.env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin and proc.stdout
    answers = []
    for i, version in enumerate(["2026-07-28", "2099-01-01"]):
        meta = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        line = {"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": {"_meta": meta}}
        proc.stdin.write(json.dumps(line).encode() + b"\n")
        await proc.stdin.drain()
        answers.append(json.loads(await proc.stdout.readline()))
    proc.stdin.close()
    await proc.wait()
    listed, refused = answers
    assert [tool["name"] for tool in listed["result"]["tools"]][:1] == ["execute_code"]
    assert listed["result"]["ttlMs"] == 60_000 and listed["result"]["cacheScope"] == "private"
    assert refused["error"]["code"] == -32022  # unsupported protocol version, naming ours
    assert refused["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


async def test_stdio_clients_hear_of_a_learned_skill(e2e: E2EStack) -> None:
    """`agentcards mcp` hears the tenant's learning too: a 2026-07-28 listen stream asking for
    resource list changes gets one when a run teaches a new capability (a new skill)."""
    code = "return await mcp.example.multiply(a=args['a'], b=args['b'])"
    body = {"code": code, "intent": "multiply two numbers over stdio", "args": {"a": 3, "b": 4}}
    async with (
        Client(_stdio(e2e)) as client,
        client.listen(resources_list_changed=True) as stream,
    ):
        ran = await anyio.to_thread.run_sync(
            lambda: httpx.post(
                f"{e2e.gateway_url}/v1/executions", params={"wait": "true"}, json=body, timeout=90
            ).json()
        )
        assert ran["status"] == "succeeded" and ran["capability"], ran
        with anyio.fail_after(60):
            assert await anext(aiter(stream)) == ResourcesListChanged()
