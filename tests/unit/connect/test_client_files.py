"""Each client's file: found where that client looks on each OS, our entry merged into a realistic
existing file, and the result parsed back with the client's own format rules."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from deploy.connect.clients import CLIENTS, Platform, client_named, config_path
from deploy.connect.files import BACKUP_SUFFIX, diff, read_config, write_config
from shared.errors import ConfigError, ValidationFailed
from tests.client_files import EXISTING, KEPT, parse_as_client

KEY = "ack_" + "k" * 43
URL = "http://127.0.0.1:8765/mcp"


def entry_for(name: str) -> dict:
    client = CLIENTS[name]
    if client.transport == "stdio":
        return {
            "command": "/opt/agentcards/bin/agentcards",
            "args": ["mcp"],
            "env": {"AGENTCARDS_API_KEY": KEY},
        }
    return client.http_entry(URL, {"Authorization": f"Bearer {KEY}"})


@pytest.mark.parametrize("name", list(CLIENTS))
def test_merge_keeps_the_rest_parses_back_and_is_idempotent(name: str, tmp_path: Path) -> None:
    client = CLIENTS[name]
    path = tmp_path / f"config.{'toml' if client.fmt == 'toml' else 'json'}"
    path.write_text(EXISTING[name])
    path.chmod(0o644)
    before = parse_as_client(name, EXISTING[name])
    config = read_config(client, path)
    entry = entry_for(name)
    backup = write_config(config, config.rendered(entry), secret=True)

    written = path.read_text()
    data = parse_as_client(name, written)
    servers = data[client.servers_key]
    assert servers["agentcards"] == entry
    assert servers[KEPT[name]] == before[client.servers_key][KEPT[name]]
    for key, value in before.items():  # every other setting is as it was
        if key != client.servers_key:
            assert data[key] == value
    if client.transport == "http":
        assert servers["agentcards"][client.url_key] == URL
        assert servers["agentcards"][client.headers_key] == {"Authorization": f"Bearer {KEY}"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert backup == path.with_name(path.name + BACKUP_SUFFIX)
    assert backup.read_text() == EXISTING[name]
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    if name == "codex":  # tomlkit keeps Codex's comments and the tables around ours
        assert "# Codex settings" in written and "# the docs server" in written
        assert data["profiles"]["fast"]["model"] == "gpt-5-mini"
        assert "headers" not in servers["agentcards"]  # Codex ignores it: http_headers
    if client.fmt == "jsonc":
        assert config.comments_dropped == ("//" in EXISTING[name])

    again = read_config(client, path)
    assert again.entry() == entry  # a second connect finds the same entry: nothing to write

    removed = again.rendered(None)
    left = parse_as_client(name, removed)
    assert "agentcards" not in left[client.servers_key]
    assert KEPT[name] in left[client.servers_key]


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_missing_file_is_created_with_only_our_entry(name: str, tmp_path: Path) -> None:
    client = CLIENTS[name]
    path = tmp_path / "new" / "dir" / "config"
    config = read_config(client, path)
    assert config.text is None and config.entry() is None
    assert write_config(config, config.rendered(entry_for(name)), secret=True) is None
    data = parse_as_client(name, path.read_text())
    assert data == {client.servers_key: {"agentcards": entry_for(name)}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


HOME = Path("/home/ann")
MAC = Platform("Darwin", Path("/Users/ann"))
WIN = Platform("Windows", Path("C:/Users/ann"), {"APPDATA": "C:/Users/ann/AppData/Roaming"})
LINUX = Platform("Linux", HOME)


@pytest.mark.parametrize(
    ("name", "platform", "expected"),
    [
        (
            "claude-desktop",
            MAC,
            "/Users/ann/Library/Application Support/Claude/claude_desktop_config.json",
        ),
        ("claude-desktop", WIN, "C:/Users/ann/AppData/Roaming/Claude/claude_desktop_config.json"),
        ("claude-desktop", LINUX, "/home/ann/.config/Claude/claude_desktop_config.json"),
        ("claude-code", MAC, "/Users/ann/.claude.json"),
        ("claude-code", WIN, "C:/Users/ann/.claude.json"),
        ("vscode", MAC, "/Users/ann/Library/Application Support/Code/User/mcp.json"),
        ("vscode", WIN, "C:/Users/ann/AppData/Roaming/Code/User/mcp.json"),
        ("vscode", LINUX, "/home/ann/.config/Code/User/mcp.json"),
        ("vscode", Platform("Linux", HOME, {"XDG_CONFIG_HOME": "/xdg"}), "/xdg/Code/User/mcp.json"),
        ("cursor", WIN, "C:/Users/ann/.cursor/mcp.json"),
        ("cursor", LINUX, "/home/ann/.cursor/mcp.json"),
        ("windsurf", MAC, "/Users/ann/.codeium/windsurf/mcp_config.json"),
        ("codex", LINUX, "/home/ann/.codex/config.toml"),
        ("codex", Platform("Linux", HOME, {"CODEX_HOME": "/srv/codex"}), "/srv/codex/config.toml"),
        ("gemini", MAC, "/Users/ann/.gemini/settings.json"),
    ],
)
def test_each_client_file_is_where_the_client_reads_it(
    name: str, platform: Platform, expected: str
) -> None:
    assert config_path(CLIENTS[name], platform, None) == Path(expected)


def test_generic_needs_a_file_and_unknown_clients_are_named() -> None:
    with pytest.raises(ValidationFailed, match="--file"):
        config_path(CLIENTS["generic"], LINUX, None)
    assert config_path(CLIENTS["generic"], LINUX, Path("/x/mcp.json")) == Path("/x/mcp.json")
    with pytest.raises(ValidationFailed, match="claude-desktop, claude-code, vscode"):
        client_named("zed")


def test_a_file_the_client_could_not_read_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}, // a comment Cursor would refuse\n}')
    with pytest.raises(ConfigError, match=r"not valid JSON .*line 1 column 20; nothing written"):
        read_config(CLIENTS["cursor"], path)
    toml = tmp_path / "config.toml"
    toml.write_text("[mcp_servers\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_config(CLIENTS["codex"], toml)
    path.write_text('{"mcpServers": ["not", "an", "object"]}')
    with pytest.raises(ConfigError, match="not an object of servers"):
        read_config(CLIENTS["cursor"], path)


def test_the_dry_run_diff_shows_the_change_without_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(EXISTING["cursor"])
    config = read_config(CLIENTS["cursor"], path)
    shown = diff(config.text, config.rendered(entry_for("cursor")), path)
    assert f"+++ {path}" in shown and '+      "url": "http://127.0.0.1:8765/mcp"' in shown
    assert KEY not in shown and "ack_kkkkkkkk…" in shown
    assert path.read_text() == EXISTING["cursor"]
