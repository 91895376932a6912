"""`agentcards connect` against a running stack: every client's own file written in a home of
its own, parsed back with that client's rules, and `connect --check` listing the tools the
client will see (HTTP with the written header; Claude Desktop's stdio command with only
HOME, PATH and the written environment)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli.main import app
from deploy.connect.clients import CLIENTS, Platform
from shared.auth.keys import hash_key
from shared.auth.store import principal_for_hash
from shared.config import Settings, get_settings, settings_to_env
from tests.client_files import EXISTING, KEPT, parse_as_client
from tests.integration.mcp_servers import example_server, time_server
from tests.stack import E2EStack, stack_fixture

stack = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})


@pytest.fixture
def cli(stack: E2EStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """The CLI as a user of this stack runs it, in a home folder of its own."""
    for name, value in settings_to_env(stack.settings).items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("APPDATA", "XDG_CONFIG_HOME", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    stack.as_new_tenant()  # the stack has a key already: no first-key question here
    yield CliRunner()
    get_settings.cache_clear()


def _key_in(name: str, entry: dict) -> str:
    client = CLIENTS[name]
    if client.transport == "stdio":
        return str(entry["env"]["AGENTCARDS_API_KEY"])
    return client.entry_headers(entry)["Authorization"].removeprefix("Bearer ")


def test_every_client_is_written_checked_idempotent_and_removed(
    cli: CliRunner, stack: E2EStack, tmp_path: Path
) -> None:
    platform = Platform.current()
    tenant = "connect-clients"
    table: list[tuple[str, str, str]] = []
    for name, client in CLIENTS.items():
        path = client.path(platform) if client.path else tmp_path / "generic-mcp.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(EXISTING[name])
        file_args = [] if client.path else ["--file", str(path)]

        written = cli.invoke(app, ["connect", name, "--tenant", tenant, *file_args])
        assert written.exit_code == 0, written.output
        assert f"wrote {path}" in written.output and "(mode 0600)" in written.output
        data = parse_as_client(name, path.read_text())
        servers = data[client.servers_key]
        assert KEPT[name] in servers, f"{name}: the server already there was lost"
        entry = servers["agentcards"]
        key = _key_in(name, entry)
        with stack.db() as conn:
            principal = principal_for_hash(conn, key_hash=hash_key(key))
        assert principal is not None and principal.tenant_id == tenant and not principal.admin
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        if client.transport == "http":
            assert client.entry_url(entry) == f"{stack.gateway_url}/mcp"
        else:  # an absolute command, and what finds the stack without a shell's environment
            assert Path(entry["command"]).is_absolute() and entry["args"][-1] == "mcp"
            assert entry["env"]["AGENTCARDS_DATABASE_URL"] == stack.settings.database_url

        checked = cli.invoke(app, ["connect", name, "--check", *file_args])
        assert checked.exit_code == 0, checked.output
        assert "ok" in checked.output and "execute" in checked.output, checked.output
        assert key not in checked.output
        table.append((name, str(path), checked.output.splitlines()[-1]))

        before = path.read_text()
        again = cli.invoke(app, ["connect", name, "--tenant", tenant, *file_args])
        assert again.exit_code == 0 and "nothing changed" in again.output, again.output
        assert path.read_text() == before

        removed = cli.invoke(app, ["disconnect", name, *file_args])
        assert removed.exit_code == 0 and "revoked" in removed.output, removed.output
        left = parse_as_client(name, path.read_text())[client.servers_key]
        assert "agentcards" not in left and KEPT[name] in left
        with stack.db() as conn:
            assert principal_for_hash(conn, key_hash=hash_key(key)) is None
    print("\n".join(" | ".join(row) for row in table))  # the table the docs show


def test_a_narrower_key_replaces_the_old_one_and_the_check_sees_only_its_tools(
    cli: CliRunner, stack: E2EStack
) -> None:
    path = CLIENTS["cursor"].path(Platform.current())  # type: ignore[misc]
    first = cli.invoke(app, ["connect", "cursor", "--tenant", "narrow"])
    assert first.exit_code == 0, first.output
    old_key = _key_in(
        "cursor", parse_as_client("cursor", path.read_text())["mcpServers"]["agentcards"]
    )

    dry = cli.invoke(
        app,
        [
            "connect",
            "cursor",
            "--tenant",
            "narrow",
            "--mode",
            "direct",
            "--tools",
            "time:*",
            "--dry-run",
        ],
    )
    assert dry.exit_code == 0, dry.output
    assert "ack_<a-new-key-made-on-write>" in dry.output and old_key not in dry.output
    assert (
        _key_in("cursor", parse_as_client("cursor", path.read_text())["mcpServers"]["agentcards"])
        == old_key
    )

    narrowed = cli.invoke(
        app, ["connect", "cursor", "--tenant", "narrow", "--mode", "direct", "--tools", "time:*"]
    )
    assert narrowed.exit_code == 0 and "is revoked" in narrowed.output, narrowed.output
    with stack.db() as conn:
        assert principal_for_hash(conn, key_hash=hash_key(old_key)) is None
    checked = cli.invoke(app, ["connect", "cursor", "--check"])
    assert checked.exit_code == 0, checked.output
    assert "time.get_current_time" in checked.output
    assert "example." not in checked.output and "execute" not in checked.output

    printed = cli.invoke(app, ["connect", "codex", "--tenant", "narrow", "--print"])
    assert printed.exit_code == 0, printed.output
    assert "[mcp_servers.agentcards]" in printed.output and "http_headers" in printed.output


def test_the_first_key_asks_before_turning_authentication_on(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack with no key at all (a fresh database): the first key needs --yes."""
    monkeypatch.setenv("AGENTCARDS_DATABASE_URL", settings.database_url or "")
    get_settings.cache_clear()
    target = tmp_path / "mcp.json"
    target.write_text(EXISTING["generic"])
    runner = CliRunner()
    refused = runner.invoke(app, ["connect", "generic", "--file", str(target)])
    assert refused.exit_code == 1
    assert "turns authentication on" in refused.output and "--yes" in refused.output
    assert target.read_text() == EXISTING["generic"]
    with settings_db(settings) as conn:
        assert conn.execute("SELECT count(*) AS n FROM api_keys").fetchone()["n"] == 0

    made = runner.invoke(app, ["connect", "generic", "--file", str(target), "--yes"])
    assert made.exit_code == 0, made.output
    assert "agentcards" in parse_as_client("generic", target.read_text())["mcpServers"]
    get_settings.cache_clear()


def settings_db(settings: Settings):  # type: ignore[no-untyped-def]
    from shared.db import connect

    return connect(settings.database_url or "")
