"""The `agentcards` block in an mcpServers file: accepted beside command/args, refused with one
line naming the server and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.toolhost.servers import load_servers
from shared.errors import ConfigError


def _write(tmp_path: Path, server: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"files": server}}, indent=2))
    return path


def test_the_block_is_read_beside_command(tmp_path: Path) -> None:
    config = {"command": "x", "agentcards": {"cache": {"ttl_s": 600, "tools": {"r": {"ttl_s": 3}}}}}
    servers = load_servers(_write(tmp_path, config))
    assert servers["files"].agentcards.cache_override("r") == {"ttl_s": 3}


@pytest.mark.parametrize(
    ("block", "key"),
    [({"cache": {"tll_s": 1}}, "agentcards.cache.tll_s"),
     ({"cache": {"ttl_s": -5}}, "agentcards.cache.ttl_s"),
     ({"cache": {"tools": {"r": {"read_only": "yes"}}}}, "agentcards.cache.tools.r.read_only")],
)  # fmt: skip
def test_a_bad_key_or_value_fails_naming_server_and_key(
    tmp_path: Path, block: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_servers(_write(tmp_path, {"command": "x", "agentcards": block}))
    message = caught.value.message
    assert "server 'files'" in message and key in message and "\n" not in message
