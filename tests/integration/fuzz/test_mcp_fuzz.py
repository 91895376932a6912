"""The MCP endpoint under fuzzing: generated tool inputs and malformed JSON-RPC never crash or 5xx."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis_jsonschema import from_schema
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.integration.fuzz.conftest import FUZZ_SETTINGS, assert_gateway_survived
from tests.stack import E2EStack

EXAMPLES = 20  # per tool: five tools, ~100 calls
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _examples(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Up to EXAMPLES inputs that fit the tool's input schema."""
    found: list[dict[str, Any]] = []

    @given(from_schema(schema))
    @settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
    def collect(value: dict[str, Any]) -> None:
        found.append(value)

    collect()
    return found


async def test_generated_tool_inputs_get_results_or_tool_errors(
    fuzz_stack: E2EStack, caller_headers: dict[str, str]
) -> None:
    calls = protocol_errors = tool_errors = 0
    async with (
        create_mcp_http_client(headers=caller_headers) as http,
        streamable_http_client(f"{fuzz_stack.gateway_url}/mcp", http_client=http) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        assert len(tools) >= 5
        for tool in tools:
            for arguments in _examples(tool.input_schema):
                calls += 1
                try:
                    result = await session.call_tool(tool.name, arguments)
                except MCPError:
                    protocol_errors += 1
                    continue
                if result.is_error:
                    tool_errors += 1
                    text = result.content[0].text  # type: ignore[union-attr]
                    assert "internal error" not in text.lower(), (tool.name, arguments, text)
    print(
        f"\nmcp fuzz: {calls} calls, {tool_errors} tool errors, {protocol_errors} protocol errors"
    )
    assert calls >= 5 * EXAMPLES // 2
    assert_gateway_survived(fuzz_stack)


def _session_id(client: httpx.Client, headers: dict[str, str]) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        },
    }
    response = client.post("/mcp", json=init, headers=MCP_HEADERS | headers)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


MALFORMED: dict[str, bytes] = {
    "not json": b"{this is not json",
    "not an object": b'"hello"',
    "empty batch": b"[]",
    "batch of garbage": b'[1, "two", null, {"jsonrpc": "2.0"}]',
    "wrong version": b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}',
    "no version": b'{"id": 1, "method": "tools/list"}',
    "unknown method": b'{"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}',
    "method not a string": b'{"jsonrpc": "2.0", "id": 1, "method": 42}',
    "params not an object": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 7}',
    "huge integer id": b'{"jsonrpc": "2.0", "id": ' + b"9" * 4000 + b', "method": "ping"}',
    "huge string id": b'{"jsonrpc": "2.0", "id": "' + b"x" * 200_000 + b'", "method": "ping"}',
    "object id": b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
    "float id": b'{"jsonrpc": "2.0", "id": 1.5e308, "method": "ping"}',
    "call without a tool name": b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}',
    "call with string arguments": (
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", '
        b'"params": {"name": "execute_code", "arguments": "return 1"}}'
    ),
    "a response nobody asked for": b'{"jsonrpc": "2.0", "id": 99, "result": {}}',
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_json_rpc_is_a_protocol_error_never_a_5xx(
    fuzz_stack: E2EStack, caller_headers: dict[str, str], name: str
) -> None:
    with fuzz_stack.client() as client:
        headers = (
            MCP_HEADERS | caller_headers | {"mcp-session-id": _session_id(client, caller_headers)}
        )
        response = client.post("/mcp", content=MALFORMED[name], headers=headers)
        assert response.status_code < 500, (response.status_code, response.text[:500])
        if response.status_code >= 400 and response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            body = response.json()
            assert "error" in body, body
        # The session still works after the bad message.
        ping = client.post(
            "/mcp",
            content=json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
            headers=headers,
        )
        assert ping.status_code == 200, ping.text[:500]
    assert_gateway_survived(fuzz_stack)
