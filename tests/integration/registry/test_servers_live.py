"""`agentcards servers add` on a running stack: the toolhost sees its MCP config change and
serves the new server's tools without a restart; `servers remove` takes them away; the server
already there keeps its session throughout.

The stack is this module's own: the test rewrites the stack's MCP config, which any other
module sharing the stack would see.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli.main import app
from deploy.launcher.embedded import free_port
from shared.config import get_settings, settings_to_env
from tests.harness import wait_until
from tests.integration.mcp_servers import time_server
from tests.registry_server import Registry, serving
from tests.stack import E2EStack, stack_fixture

stack = stack_fixture(lambda tmp: {"time": time_server()}, shared=False, learning=False)


@pytest.fixture
def cli(stack: E2EStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name, value in settings_to_env(stack.settings).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def _tools(stack: E2EStack, server: str) -> list[str]:
    with stack.client() as http:
        rows = http.get("/v1/tools").json()["tools"]
    return sorted(r["name"] for r in rows if r["server"] == server and r["available"])


def test_search_add_serves_new_tools_remove_takes_them_and_others_stay(
    cli: CliRunner, stack: E2EStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    stack.start(
        "conformance-http",
        [sys.executable, "-m", "tests.integration.conformance_server", "--http", str(port)],
    )
    document = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.github.agentcards-tests/conformance",
        "description": "The conformance test server over streamable HTTP",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": f"http://127.0.0.1:{port}/mcp"}],
    }
    time_synced = stack.procs["toolhost"].log().count("synced time:")
    with serving(Registry([document])) as registry:
        monkeypatch.setenv("AGENTCARDS_REGISTRY_URL", registry.url)
        get_settings.cache_clear()
        found = cli.invoke(app, ["servers", "search", "conformance"])
        assert found.exit_code == 0 and document["name"] in found.output, found.output
        added = cli.invoke(app, ["servers", "add", document["name"]])
        assert added.exit_code == 0, added.output
        print(found.output, added.output, sep="\n")

    wait_until(
        lambda: "test_simple_text" in _tools(stack, "conformance"),
        what="the added server's tools served",
        proc=stack.procs["toolhost"],
    )
    assert len(_tools(stack, "conformance")) > 5
    assert _tools(stack, "time") == ["convert_time", "get_current_time"]

    removed = cli.invoke(app, ["servers", "remove", "conformance"])
    assert removed.exit_code == 0, removed.output
    wait_until(
        lambda: not _tools(stack, "conformance"), what="the removed server's tools gone",
        proc=stack.procs["toolhost"],
    )  # fmt: skip

    # A hand edit that does not parse changes nothing; the time server was never reconnected.
    config = Path(stack.settings.mcp_config or "")
    config.write_text(config.read_text() + "{")
    wait_until(
        lambda: "changed but not applied" in stack.procs["toolhost"].log(),
        what="the broken edit logged", proc=stack.procs["toolhost"],
    )  # fmt: skip
    assert _tools(stack, "time") == ["convert_time", "get_current_time"]
    assert stack.procs["toolhost"].log().count("synced time:") == time_synced
    config.write_text(json.dumps({"mcpServers": {"time": time_server()}}))
