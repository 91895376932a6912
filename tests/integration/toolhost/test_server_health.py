"""A server that hangs or crashes: the toolhost still gets ready and says why, in every place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from shared.db import connect
from tests.integration import mcp_servers as real

pytestmark = pytest.mark.integration

Start = Callable[..., real.ToolhostProcess]


def _server_row(settings: Settings, name: str) -> dict[str, Any]:
    with connect(settings.database_url or "") as conn:
        row = conn.execute("SELECT * FROM mcp_servers WHERE name = %s", (name,)).fetchone()
    assert row is not None, name
    return dict(row)


def test_hanging_server_times_out_with_a_clear_error(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    config = {"example": real.example_server(tmp_path), "stuck": real.hanging_server()}
    host = toolhost(
        real.write_config(tmp_path / "mcp.json", config),
        extra_env={"AGENTCARDS_MCP_CONNECT_TIMEOUT_S": "10"},
    )
    beat = host.wait_ready()  # ready once the stuck server's first attempt timed out
    assert beat["servers"]["example"] == "ready"
    assert beat["servers"]["stuck"] == "retrying"
    error = beat["errors"]["stuck"]
    assert "no answer to initialize" in error and "within 10s" in error
    assert "AGENTCARDS_MCP_CONNECT_TIMEOUT_S" in error
    assert "no answer to initialize" in _server_row(settings, "stuck")["last_error"]


def test_crashing_server_stderr_is_in_last_error(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    message = real.CRASH_MESSAGE
    host = toolhost(real.example_and_crashing_config(tmp_path))
    beat = host.wait_ready()
    assert beat["servers"]["crashy"] == "retrying"
    assert message in beat["errors"]["crashy"]
    assert message in _server_row(settings, "crashy")["last_error"]
    assert "example" not in beat["errors"]
    # The server's stderr still reaches the toolhost's log, marked with its name.
    assert f"[crashy] {message}" in host.log()
