"""`agentcards servers` against a registry of the tests' own over HTTP: search, add (secrets
sealed), list (newer versions seen), remove, and every bad answer leaving the config as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli.main import app
from deploy.launcher.embedded import free_port
from services.toolhost.servers import load_servers
from shared.config import get_settings
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import is_sealed, unseal
from tests.registry_server import (
    NPM_BUSINESS_HOTELS,
    NPM_GITHUB,
    PYPI_EXCEL_LSP,
    REMOTE_EXA,
    Registry,
    serving,
)

EXISTING = {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}


@pytest.fixture
def registry() -> Iterator[Registry]:
    with serving(Registry([PYPI_EXCEL_LSP, NPM_BUSINESS_HOTELS, NPM_GITHUB, REMOTE_EXA])) as r:
        yield r


@pytest.fixture
def config(tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(EXISTING, indent=2))
    monkeypatch.setenv("AGENTCARDS_MCP_CONFIG", str(path))
    monkeypatch.setenv("AGENTCARDS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AGENTCARDS_REGISTRY_URL", registry.url)
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


def test_search_add_list_remove_with_a_sealed_secret(config: Path, registry: Registry) -> None:
    cli = CliRunner()
    found = cli.invoke(app, ["servers", "search", "github"])
    assert found.exit_code == 0, found.output
    assert "io.github.modelcontextprotocol/server-github" in found.output
    assert "io.github.Brody900/excel-lsp" in found.output and "1 servers" not in found.output

    added = cli.invoke(
        app,
        ["servers", "add", "io.github.modelcontextprotocol/server-github",
         "--env", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_secret123"],
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert (
        "added server-github" in added.output
        and "sealed: GITHUB_PERSONAL_ACCESS_TOKEN" in added.output
    )
    text = config.read_text()
    assert "ghp_secret123" not in text  # never in plaintext
    entry = json.loads(text)["mcpServers"]["server-github"]
    assert entry["command"] == "npx"
    assert entry["args"] == ["-y", "@modelcontextprotocol/server-github@0.6.2"]
    sealed = entry["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"]
    assert is_sealed(sealed)
    keys = PiiKeys.from_settings(get_settings())
    assert (
        unseal(keys, server="server-github", name="GITHUB_PERSONAL_ACCESS_TOKEN", value=sealed)
        == "ghp_secret123"
    )
    assert set(load_servers(config)) == {"time", "server-github"}  # as the toolhost reads it

    remote = cli.invoke(app, ["servers", "add", "ai.exa/exa"])
    assert remote.exit_code == 0, remote.output
    assert json.loads(config.read_text())["mcpServers"]["exa"]["url"] == "https://mcp.exa.ai/mcp"

    registry.publish({**NPM_GITHUB, "version": "0.6.3"})
    listed = cli.invoke(app, ["servers", "list"])
    assert listed.exit_code == 0, listed.output
    assert "0.6.3 available" in listed.output and "up to date" in listed.output

    removed = cli.invoke(app, ["servers", "remove", "io.github.modelcontextprotocol/server-github"])
    assert removed.exit_code == 0, removed.output
    assert set(json.loads(config.read_text())["mcpServers"]) == {"time", "exa"}
    gone = cli.invoke(app, ["servers", "remove", "exa"])
    assert gone.exit_code == 0 and json.loads(config.read_text()) == EXISTING


def test_a_registry_serving_only_v0_and_a_local_server_json(
    config: Path, registry: Registry, tmp_path: Path
) -> None:
    registry.v0_only = True
    cli = CliRunner()
    added = cli.invoke(app, ["servers", "add", "io.github.Brody900/excel-lsp"])
    assert added.exit_code == 0, added.output
    assert json.loads(config.read_text())["mcpServers"]["excel-lsp"]["args"] == [
        "excel-lsp==0.1.0",
        "serve",
    ]
    document = tmp_path / "server.json"
    document.write_text(json.dumps(NPM_BUSINESS_HOTELS))
    local = cli.invoke(app, ["servers", "add", "--from", str(document), "--name", "hotels"])
    assert local.exit_code == 0, local.output
    origin = json.loads(config.read_text())["mcpServers"]["hotels"]["agentcards"]["registry"]
    assert origin == {"name": NPM_BUSINESS_HOTELS["name"], "version": "2.0.2", "registry": None}


def test_bad_input_errors_and_writes_nothing(
    config: Path, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = CliRunner()
    before = config.read_text()

    def refused(args: list[str], says: str) -> None:
        result = cli.invoke(app, ["servers", *args])
        assert result.exit_code == 1, result.output
        assert says in " ".join(result.output.split()), result.output
        assert config.read_text() == before

    refused(["add", "io.github.nobody/nothing"], "no server named 'io.github.nobody/nothing'")
    refused(["add", "io.github.modelcontextprotocol/server-github"],
            "GITHUB_PERSONAL_ACCESS_TOKEN is required")  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**PYPI_EXCEL_LSP, "name": "not a registry name"}))
    refused(["add", "--from", str(bad)], "is not a valid server.json: name")
    nuget = tmp_path / "nuget.json"
    nuget.write_text(json.dumps({
        "name": "io.github.joelverhagen/knapcode-samplemcpserver", "description": "d",
        "version": "0.5.0", "packages": [{"registryType": "nuget",
        "identifier": "Knapcode.SampleMcpServer", "version": "0.5.0"}]}))  # fmt: skip
    refused(["add", "--from", str(nuget)], "offers nothing this gateway can run: nuget")
    refused(["add", "ai.exa/exa", "--name", "time"], "already has a server 'time'")
    registry.garbage = True
    refused(["add", "ai.exa/exa"], "with something that is not JSON")
    refused(["search", "exa"], "not JSON")
    registry.garbage = False
    monkeypatch.setenv("AGENTCARDS_REGISTRY_URL", f"http://127.0.0.1:{free_port()}")  # nobody
    get_settings.cache_clear()
    refused(["add", "ai.exa/exa"], "is unreachable")
