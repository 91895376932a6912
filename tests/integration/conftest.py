"""Fixtures shared by the integration suites: real MCP servers and toolhost processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.config import Settings
from tests.integration.mcp_servers import ToolhostProcess, install_memory_server, toolhost_factory


@pytest.fixture(scope="session")
def memory_server_bin() -> Path:
    """The `mcp-server-memory` binary from npm (installed by tests/npm/install.sh)."""
    return install_memory_server()


@pytest.fixture
def toolhost(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., ToolhostProcess]]:
    """Factory starting `python -m services.toolhost` with a config; all stopped after the test."""
    yield from toolhost_factory(settings, tmp_path)
