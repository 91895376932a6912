"""A server dropped from the config is `removed`, not a ghost: real toolhost, real MCP servers, real Postgres.

The toolhost is restarted with a config without `time` (mcp-server-time from PyPI):
its row and tools stay (ids live on) but are unavailable, tool listings and unknown-tool
errors leave them out (history only: `include_removed=true`), search no longer offers them, and a capability that uses them is `degraded` and ranked below a runnable one,
over REST and over MCP. Put back in the config, it is available again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp
import pytest
from fastapi.testclient import TestClient

from services.gateway.mcp.server import build_mcp_server
from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from shared.tools.catalog import ToolCatalog
from shared.tools.store import list_tools
from tests.integration.discovery.helpers import insert_capability
from tests.integration.mcp_servers import ToolhostProcess, example_server, time_server, write_config

pytestmark = pytest.mark.integration

QUERY = "get the current time in Tokyo"
TIME_QUERY = "current time in a timezone"


def _capability(settings: Settings, *, intent: str, name: str, tools: list[str]) -> str:
    (vector,) = get_embedder(settings).embed([intent])
    with connect(settings.database_url or "") as conn:
        return insert_capability(
            conn, name=name, embedding=vector, success_rate=0.8, tools_used=tools
        )


def _get(client: TestClient, path: str) -> dict[str, Any]:
    response = client.get(path)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _servers(client: TestClient) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in _get(client, "/v1/servers")["servers"]}


def _tools(client: TestClient, *, include_removed: bool = False) -> dict[str, dict[str, Any]]:
    query = "?include_removed=true" if include_removed else ""
    return {t["id"]: t for t in _get(client, f"/v1/tools{query}")["tools"]}


def _search_ids(client: TestClient) -> list[str]:
    hits = _post(client, "/v1/tools/search", {"query": TIME_QUERY, "limit": 50})["hits"]
    return [h["id"] for h in hits]


def _matches(client: TestClient) -> list[dict[str, Any]]:
    found = _post(client, "/v1/capabilities/search", {"intent": QUERY, "limit": 5})
    return list(found["capabilities"])


async def _over_mcp(client: TestClient) -> tuple[dict[str, Any], dict[str, Any]]:
    server = build_mcp_server(lambda: client.app.state.gateway)  # type: ignore[attr-defined]
    async with mcp.Client(server) as session:
        caps = await session.call_tool("search_capabilities", {"intent": QUERY})
        tools = await session.call_tool("search_tools", {"query": TIME_QUERY, "limit": 50})
    return _structured(caps), _structured(tools)


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def test_dropped_server_is_removed_then_comes_back(
    client: TestClient,
    settings: Settings,
    tmp_path: Path,
    toolhost: Callable[..., ToolhostProcess],
) -> None:
    both = write_config(
        tmp_path / "both.json", {"example": example_server(tmp_path), "time": time_server()}
    )
    without_time = write_config(tmp_path / "no-time.json", {"example": example_server(tmp_path)})
    first = toolhost(both)
    assert {n: s["state"] for n, s in _servers(client).items()} == {
        "example": "ready",
        "time": "ready",
    }
    uses_time = _capability(
        settings, intent=QUERY, name="time_in_tokyo", tools=["time:get_current_time"]
    )
    runnable = _capability(
        settings,
        intent="tell me what time it is in Tokyo right now",
        name="tokyo_clock",
        tools=["example:add"],
    )
    # Both runnable: the exact intent ranks first.
    assert [(m["id"], m["degraded"]) for m in _matches(client)] == [
        (uses_time, False),
        (runnable, False),
    ]
    assert "time:get_current_time" in _search_ids(client)

    # Restart without `time`: it is removed, its rows stay, nothing offers it as usable.
    first.stop()
    second = toolhost(without_time)
    servers = _servers(client)
    assert servers["time"]["state"] == "removed"
    assert "configuration" in servers["time"]["last_error"]
    assert servers["time"]["tool_count"] == 0
    assert servers["example"]["state"] == "ready"
    # Listings name only configured servers' tools; the removed ones are history, on request.
    tools = _tools(client)
    assert not [t for t in tools if t.startswith("time:")]
    assert tools["example:add"]["available"] is True
    history = _tools(client, include_removed=True)
    assert history["time:get_current_time"]["available"] is False
    assert history["time:get_current_time"]["server_state"] == "removed"
    # The run's catalog (the worker's tool scope reads list_tools): a call to the removed
    # server's tool is unknown, and the error's server list and nearest ids leave it out.
    with connect(settings.database_url or "") as conn:
        known = [t["id"] for t in list_tools(conn)]
    catalog = ToolCatalog.build({}, known)
    _, error = catalog.resolve("time:get_current_time")
    assert error is not None and error["type"] == "unknown_tool", error
    assert "time:" not in json.dumps(error.get("details")), error
    assert "servers: example)" in error["message"], error
    _, near = catalog.resolve("example:ad")
    assert near is not None and "time:" not in json.dumps(near), near
    found = _search_ids(client)
    assert found and not [t for t in found if t.startswith("time:")]

    matches = _matches(client)
    assert [m["id"] for m in matches] == [runnable, uses_time]
    assert matches[0]["degraded"] is False and matches[0]["missing_tools"] == []
    assert matches[1]["degraded"] is True
    assert matches[1]["missing_tools"] == ["time:get_current_time"]
    listed = {c["id"]: c for c in _get(client, "/api/capabilities")["capabilities"]}
    # The list's items are the dashboard's contract (no `degraded`): search and MCP carry it.
    assert set(listed) == {runnable, uses_time}

    caps, tools_over_mcp = asyncio.run(_over_mcp(client))
    assert [(c["id"], c["degraded"]) for c in caps["capabilities"]] == [
        (runnable, False),
        (uses_time, True),
    ]
    assert not [t for t in tools_over_mcp["hits"] if t["id"].startswith("time:")]

    # Back in the config: ready, available, found, runnable again.
    second.stop()
    toolhost(both)
    assert _servers(client)["time"]["state"] == "ready"
    assert _tools(client)["time:get_current_time"]["available"] is True
    assert "time:get_current_time" in _search_ids(client)
    assert [(m["id"], m["degraded"]) for m in _matches(client)] == [
        (uses_time, False),
        (runnable, False),
    ]
