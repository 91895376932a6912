"""The mcpServers file: accepted shapes and the messages bad ones produce."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.toolhost.servers import HttpServer, StdioServer, load_servers, parse_servers
from shared.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]


def test_shipped_example_config_is_valid() -> None:
    servers = load_servers(REPO / "deploy" / "examples" / "mcp_servers.json")
    assert set(servers) == {"example", "time"}
    assert all(isinstance(s, StdioServer) for s in servers.values())


def test_both_transports_and_disabled() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "local": {"type": "stdio", "command": "x", "args": ["-y"], "env": {"K": "v"}},
                "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "t"}},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    assert set(servers) == {"local", "remote"}
    remote = servers["remote"]
    assert isinstance(remote, HttpServer) and remote.transport == "http"
    assert remote.public_config()["headers"] == {"Authorization": "***"}


def test_roots_become_file_uris_and_default_to_none() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "fs": {"command": "x", "roots": ["/srv/my data", "file:///home/ada"]},
                "web": {"url": "https://example.com/mcp", "roots": ["/srv"]},
                "plain": {"command": "x"},
            }
        }
    )
    assert servers["fs"].roots == ["file:///srv/my%20data", "file:///home/ada"]
    assert servers["web"].roots == ["file:///srv"]
    assert servers["plain"].roots == []  # the server keeps its own directories


def test_the_revision_is_negotiated_unless_the_handshake_is_asked_for() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "new": {"command": "x"},
                "old": {"url": "https://example.com/mcp", "protocol": "2025-11-25"},
            }
        }
    )
    assert servers["new"].protocol == "auto" and servers["old"].protocol == "2025-11-25"


def test_a_server_acting_for_the_person_calling_says_for_which_audience() -> None:
    auth = {"type": "token-exchange", "audience": "https://api.example.com", "scopes": ["read"]}
    server = parse_servers({"mcpServers": {"s": {"url": "https://h/mcp", "auth": auth}}})["s"]
    assert isinstance(server, HttpServer) and server.auth is not None
    assert server.auth.audience == "https://api.example.com" and server.auth.scopes == ["read"]
    assert server.public_config()["auth"] == auth
    own = parse_servers({"mcpServers": {"s": {"url": "https://h/mcp", "auth": {"type": "oauth"}}}})
    assert own["s"].public_config()["auth"] == {"type": "oauth", "scopes": []}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mcpServers": {"s": {"args": []}}}, "server 's': missing 'command'"),
        ({"mcpServers": {"s": {"command": ""}}}, "'command'"),
        ({"mcpServers": {"s": {"command": "x", "cmd": "y"}}}, "unknown key 'cmd'"),
        ({"mcpServers": {"s": {"command": "x", "url": "http://h"}}}, "not both"),
        ({"mcpServers": {"s": {"url": "ftp://h"}}}, "http:// or https://"),
        ({"mcpServers": {"s": {"command": "x", "args": "notalist"}}}, "'args'"),
        ({"mcpServers": {"_bench": {"command": "x"}}}, "server name '_bench'"),
        ({"mcpServers": {"a:b": {"command": "x"}}}, "server name 'a:b'"),
        ({"servers": {}}, "mcpServers"),
        ({"mcpServers": {}, "other": 1}, "unknown top-level key(s) other"),
        ({"mcpServers": {"s": "python"}}, "expected an object"),
        ({"mcpServers": {"s": {"command": "x", "roots": ["data"]}}}, "absolute path or a file://"),
        ({"mcpServers": {"s": {"command": "x", "protocol": "2026-07-28"}}}, "'protocol'"),
        (
            {"mcpServers": {"s": {"url": "http://h", "auth": {"type": "token-exchange"}}}},
            "missing 'auth.token-exchange.audience'",
        ),
        (
            {"mcpServers": {"s": {"url": "http://h", "auth": {"type": "basic"}}}},
            "expected tags: 'token-exchange', 'oauth'",
        ),
        (
            {
                "mcpServers": {
                    "s": {"command": "x", "auth": {"type": "token-exchange", "audience": "a"}}
                }
            },
            "unknown key 'auth'",
        ),
    ],
)
def test_bad_configs_say_what_to_fix(data: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_servers(data, source="cfg.json")
    assert message in info.value.message and "cfg.json" in info.value.message


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read MCP config"):
        load_servers(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"a": }')
    with pytest.raises(ConfigError, match=r"not valid JSON: .* line 1 column"):
        load_servers(bad)
    assert load_servers(None) == {}


def test_server_names_that_read_the_same_in_agent_code_are_refused() -> None:
    clash = {"mcpServers": {"my-server": {"command": "x"}, "my_server": {"command": "y"}}}
    with pytest.raises(
        ConfigError, match=r"'my-server' and 'my_server' both read as mcp\.my_server"
    ):
        parse_servers(clash)
    # A disabled one takes no name.
    clash["mcpServers"]["my_server"]["disabled"] = True
    assert list(parse_servers(clash)) == ["my-server"]
