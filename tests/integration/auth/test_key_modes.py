"""A key's default MCP mode (`agentcards keys create --mcp-mode`): stored, listed, resolved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from deploy.cli.main import app
from shared.auth.keys import hash_key
from shared.auth.store import principal_for_hash
from shared.config import Settings, get_settings
from shared.db import connect


@pytest.fixture
def cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("AGENTCARDS_DATABASE_URL", settings.database_url or "")
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def test_a_key_created_with_a_mode_resolves_to_it_and_lists_it(
    cli: CliRunner, settings: Settings
) -> None:
    created = cli.invoke(app, ["keys", "create", "--tenant", "modes", "--mcp-mode", "both"])
    assert created.exit_code == 0, created.output
    key = next(line for line in created.output.splitlines() if line.startswith("ack_"))
    with connect(settings.database_url or "") as conn:
        principal = principal_for_hash(conn, key_hash=hash_key(key))
    assert principal is not None and principal.mcp_mode == "both"
    listed = cli.invoke(app, ["keys", "list", "--tenant", "modes"])
    assert listed.exit_code == 0 and "both" in listed.output, listed.output


def test_an_unknown_mode_is_refused_naming_the_modes(cli: CliRunner) -> None:
    refused = cli.invoke(app, ["keys", "create", "--tenant", "modes", "--mcp-mode", "sideways"])
    assert refused.exit_code == 1
    assert "code, direct, both" in refused.output, refused.output
