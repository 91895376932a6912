"""MCP Apps through the gateway, on the real stack: two SDK servers with the Apps extension
and the same ``ui://dashboard/app.html`` view, read by SDK clients that declared Apps (at
2025-11-25 and 2026-07-28) on a server's own endpoint and on the aggregate views, and by a
client that did not, which sees what it saw before Apps passed through."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession, types
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from shared.auth.store import issue_key
from shared.tools.apps import APP_MIME_TYPE, EXTENSION_ID
from tests.integration.apps_server import VIEW, page
from tests.integration.mcp_servers import time_server
from tests.stack import REPO, E2EStack, stack_fixture


def _apps_server(label: str, **entry: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.integration.apps_server"],
        "env": {"APPS_TEST_LABEL": label},
        "cwd": str(REPO),
        **entry,
    }


# apps-b is spoken to at 2025-11-25 (the extension declared at initialize), apps-a at
# 2026-07-28 (declared on each request).
stack = stack_fixture(
    lambda tmp: {
        "apps-a": _apps_server("A"),
        "apps-b": _apps_server("B", protocol="2025-11-25"),
        "time": time_server(),
    }
)

APPS = {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}
OUT = Path(tempfile.gettempdir()) / "agentcards-apps"  # the round trip's transcript


@contextlib.asynccontextmanager
async def session(
    stack: E2EStack, path: str, *, apps: bool, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 SDK session on ``path``, declaring MCP Apps or not."""
    async with (
        create_mcp_http_client(headers=headers or stack.headers) as http,
        streamable_http_client(f"{stack.gateway_url}{path}", http_client=http) as (read, write),
        ClientSession(read, write, extensions=APPS if apps else None) as opened,
    ):
        await opened.initialize()
        yield opened


@contextlib.asynccontextmanager
async def modern_client(
    stack: E2EStack, path: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """A 2026-07-28 SDK client on ``path`` that declares MCP Apps (on every request)."""
    async with (
        create_mcp_http_client(headers={**stack.headers, **(headers or {})}) as http,
        Client(
            streamable_http_client(f"{stack.gateway_url}{path}", http_client=http),
            extensions=[advertise(EXTENSION_ID, APPS[EXTENSION_ID])],
        ) as opened,
    ):
        assert opened.protocol_version == "2026-07-28"
        yield opened


def _said(content: types.TextResourceContents) -> str:
    """A read's contents in a transcript line: its type, size and whose page it is."""
    who = (content.text or "").split("<h1 id='who'>")[-1].split("<")[0]
    return f"{content.mime_type}, {len(content.text or '')} chars, the page of {who}"


def _tools(listed: types.ListToolsResult) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in listed.tools}


def _ui(tool: types.Tool) -> Any:
    return (tool.meta or {}).get("ui")


def _views(listed: types.ListResourcesResult) -> dict[str, types.Resource]:
    return {str(r.uri): r for r in listed.resources if "dashboard" in str(r.uri)}


async def _read_page(opened: ClientSession | Client, uri: str) -> types.TextResourceContents:
    read = await opened.read_resource(uri)
    [content] = read.contents
    assert isinstance(content, types.TextResourceContents), read
    assert str(content.uri) == uri and content.mime_type == APP_MIME_TYPE, content
    return content


async def test_a_server_s_apps_reach_an_apps_client_on_every_view(stack: E2EStack) -> None:
    tenant = stack.as_new_tenant()
    trip: list[str] = []  # the round trip, written to OUT for the docs
    with httpx.Client(base_url=stack.gateway_url, headers=tenant.headers, timeout=30) as http:
        servers = {s["name"]: s for s in http.get("/v1/servers").json()["servers"]}
    # What the dashboard shows: which servers offer Apps.
    assert {name: s["apps"] for name, s in servers.items()} == {
        "apps-a": True,
        "apps-b": True,
        "time": False,
    }
    trip.append(f"GET /v1/servers -> apps {[n for n, s in servers.items() if s['apps']]}")

    # The endpoints that pass a server's Apps on declare the extension (at 2026-07-28: the
    # 2025-11-25 answer to initialize has no place for extensions); time's does not.
    for path, declares in (
        ("/mcp/servers/apps-a", True),
        ("/mcp/servers/time", False),
        ("/mcp/servers", True),
        ("/mcp", True),
    ):
        async with modern_client(tenant, path) as modern:
            extensions = modern.server_capabilities.extensions or {}
            assert (EXTENSION_ID in extensions) is declares, (path, extensions)

    # A server's own endpoint: its names, its view, its tool's _meta.ui as it gave them.
    async with session(tenant, "/mcp/servers/apps-a", apps=True) as opened:
        tool = _tools(await opened.list_tools())["show_dashboard"]
        assert _ui(tool) == {"resourceUri": VIEW, "visibility": ["model", "app"]}
        trip.append(f"/mcp/servers/apps-a tools/list: show_dashboard _meta.ui {_ui(tool)}")
        view = _views(await opened.list_resources())[VIEW]
        assert view.mime_type == APP_MIME_TYPE
        content = await _read_page(opened, VIEW)
        # The page as the server wrote it: the privacy layer rewrites no HTML or script.
        assert content.text == page("A")
        trip.append(f"/mcp/servers/apps-a resources/read {VIEW} -> {_said(content)}")
        assert content.meta == {
            "ui": {
                "csp": {"connectDomains": ["https://api.apps-test.example"]},
                "prefersBorder": True,
            }
        }
        called = await opened.call_tool("show_dashboard", {"city": "Oslo"})
        text = called.content[0]
        # The toolhost declared Apps to the server (tool calls are made for any caller).
        assert isinstance(text, types.TextContent) and text.text.endswith("declared apps: yes")
        # A page embedded in a result: one with nothing to tokenise arrives as the server
        # sent it; one holding personal data is withheld, never tokenised into a broken page.
        clean = (await opened.call_tool("embed_dashboard", {"clean": True})).content
        assert isinstance(clean[1], types.EmbeddedResource), clean
        assert (
            clean[1]
            .resource.model_dump(exclude_none=True)["text"]
            .endswith("no data</p></body></html>")
        )
        withheld = (await opened.call_tool("embed_dashboard", {"clean": False})).content
        assert [type(block) for block in withheld] == [types.TextContent, types.TextContent]
        assert "withheld" in withheld[1].text and "EMAIL" in withheld[1].text, withheld
        assert "4111" not in str(withheld) and "help@" not in str(withheld)

    # The aggregate: each server's view under ui://<server>/<path>, resourceUri to match,
    # and each read routed back to the server that has it.
    async with session(tenant, "/mcp/servers", apps=True) as opened:
        tools = _tools(await opened.list_tools())
        for server in ("apps-a", "apps-b"):
            ui = _ui(tools[f"{server}.show_dashboard"])
            assert ui == {
                "resourceUri": f"ui://{server}/dashboard/app.html",
                "visibility": ["model", "app"],
            }
        assert _ui(tools["time.get_current_time"]) is None
        views = _views(await opened.list_resources())
        assert set(views) == {"ui://apps-a/dashboard/app.html", "ui://apps-b/dashboard/app.html"}
        for server, label in (("apps-a", "A"), ("apps-b", "B")):
            uri = _ui(tools[f"{server}.show_dashboard"])["resourceUri"]
            content = await _read_page(opened, uri)
            assert content.text == page(label)
            trip.append(f"/mcp/servers tools/list: {server}.show_dashboard resourceUri {uri}")
            trip.append(f"/mcp/servers resources/read {uri} -> {_said(content)}")
            # The toolhost declared Apps at either revision it speaks to its servers.
            called = await opened.call_tool(f"{server}.show_dashboard", {"city": "Oslo"})
            text = called.content[0]
            assert isinstance(text, types.TextContent), called
            assert text.text == f"{label} dashboard for Oslo; client declared apps: yes"

    # /mcp in direct mode, at 2026-07-28 (the extension declared on each request).
    async with modern_client(tenant, "/mcp", {"X-AgentCards-Mode": "direct"}) as modern:
        tools = _tools(await modern.list_tools())
        uri = _ui(tools["apps-b.show_dashboard"])["resourceUri"]
        assert uri == "ui://apps-b/dashboard/app.html"
        assert set(_views(await modern.list_resources())) == {
            "ui://apps-a/dashboard/app.html",
            "ui://apps-b/dashboard/app.html",
        }
        content = await _read_page(modern, uri)
        assert content.text == page("B")
        trip.append(f"/mcp (direct, 2026-07-28) resources/read {uri} -> {_said(content)}")
    OUT.mkdir(exist_ok=True)
    (OUT / "round-trip.txt").write_text("\n".join(trip) + "\n")


async def test_a_client_without_apps_sees_what_it_saw_before(stack: E2EStack) -> None:
    tenant = stack.as_new_tenant()
    async with session(tenant, "/mcp/servers/apps-a", apps=False) as opened:
        assert _ui(_tools(await opened.list_tools())["show_dashboard"]) is None
    async with session(tenant, "/mcp/servers", apps=False) as opened:
        tool = _tools(await opened.list_tools())["apps-a.show_dashboard"]
        assert tool.meta == {"agentcards/tool": "apps-a:show_dashboard"}
        views = _views(await opened.list_resources())
        old_name = "agentcards://apps-a/ui://dashboard/app.html"
        assert set(views) == {old_name, "agentcards://apps-b/ui://dashboard/app.html"}
        read = await opened.read_resource(old_name)
        assert [str(c.uri) for c in read.contents] == [old_name]


async def test_a_key_reads_only_the_views_of_servers_it_may_use(stack: E2EStack) -> None:
    with stack.db() as conn:
        _, key = issue_key(conn, tenant_id=f"t-{uuid.uuid4().hex[:10]}", tool_patterns=["apps-a:*"])
    headers = {"Authorization": f"Bearer {key}"}
    async with session(stack, "/mcp/servers", apps=True, headers=headers) as opened:
        assert {name.split(".")[0] for name in _tools(await opened.list_tools())} == {"apps-a"}
        assert set(_views(await opened.list_resources())) == {"ui://apps-a/dashboard/app.html"}
        with pytest.raises(MCPError) as refused:
            await opened.read_resource("ui://apps-b/dashboard/app.html")
        assert refused.value.error.data["type"] == "tool_not_allowed", refused.value.error
        with pytest.raises(MCPError) as bad:
            await opened.read_resource("ui://no server/app.html")
        assert "ui://<server>/<path>" in bad.value.error.message
