"""/healthz tells the truth about the toolhost and each MCP server, with real toolhost processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.integration import mcp_servers as real

# /healthz is 200 only with a live sandbox worker too: each test here has one.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("sandbox_worker")]

Start = Callable[..., real.ToolhostProcess]


def test_no_toolhost_is_503_naming_it(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["toolhost"]
    assert "no toolhost heartbeat" in body["checks"]["toolhost"]["detail"]


def test_crash_looping_toolhost_is_503(client: TestClient, toolhost: Start, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"s": {"comand": "x"}}}')
    host = toolhost(broken, wait=False)
    assert host.proc.wait(60) == 2  # what the supervisor would restart, again and again
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["failing"] == ["toolhost"]


def test_each_server_listed_with_state_and_last_error(
    client: TestClient, toolhost: Start, tmp_path: Path
) -> None:
    message = real.CRASH_MESSAGE
    toolhost(real.example_and_crashing_config(tmp_path))
    response = client.get("/healthz")
    # A failed server does not take the gateway out of service: 200, but "degraded".
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["checks"]["toolhost"]["ok"]
    servers = {s["name"]: s for s in body["mcp_servers"]}
    assert servers["example"]["state"] == "ready" and servers["example"]["last_error"] is None
    assert servers["crashy"]["state"] in {"down", "connecting"}
    assert message in servers["crashy"]["last_error"]
