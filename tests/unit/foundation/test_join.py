"""`agentcards gateway|toolhost|worker`: the command line a joining host runs, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.cli.join import join_argv
from shared.config import Settings
from shared.errors import ConfigError

URLS = {"database_url": "postgresql://u:p@db:5432/a", "redis_url": "redis://redis:6379/0"}


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return Settings(home=tmp_path, env="test", **{**URLS, **overrides})  # type: ignore[arg-type]


def test_a_sandbox_worker_takes_its_node_name_and_concurrency(tmp_path: Path) -> None:
    argv = join_argv(_settings(tmp_path), "sandbox", node_name="sandbox-b@%h", concurrency=6)
    assert argv[argv.index("-Q") + 1] == "executions"
    assert argv[argv.index("-n") + 1] == "sandbox-b@%h"
    assert argv[argv.index("--concurrency") + 1] == "6"


def test_gateway_and_learning_worker_run_what_up_runs(tmp_path: Path) -> None:
    assert join_argv(_settings(tmp_path), "gateway")[1:] == ["-m", "services.gateway"]
    learning = join_argv(_settings(tmp_path), "learning")
    assert learning[learning.index("-Q") + 1] == "learning,maintenance"


def test_without_urls_nothing_embedded_is_started(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, env="test")
    with pytest.raises(ConfigError, match="AGENTCARDS_DATABASE_URL and AGENTCARDS_REDIS_URL"):
        join_argv(settings, "sandbox")


def test_a_toolhost_needs_a_valid_mcp_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="AGENTCARDS_MCP_CONFIG must name"):
        join_argv(_settings(tmp_path), "toolhost")
    broken = tmp_path / "mcp.json"
    broken.write_text('{"mcpServers": {"x": {}}}')
    with pytest.raises(ConfigError, match="line 1"):
        join_argv(_settings(tmp_path, mcp_config=broken), "toolhost")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"mcpServers": {"t": {"command": "python", "args": []}}}))
    assert join_argv(_settings(tmp_path, mcp_config=good), "toolhost")[-1] == "services.toolhost"
