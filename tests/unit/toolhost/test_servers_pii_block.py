"""The `pii` key of a server's `agentcards` block: off, some kinds, per tool; bad kinds refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.toolhost.servers import load_servers
from shared.errors import ConfigError


def _block(tmp_path: Path, pii: object):  # type: ignore[no-untyped-def]
    path = tmp_path / "mcp.json"
    server = {"command": "x", "agentcards": {"pii": pii}}
    path.write_text(json.dumps({"mcpServers": {"crm": server}}))
    return load_servers(path)["crm"].agentcards


def test_default_off_kinds_and_per_tool(tmp_path: Path) -> None:
    assert _block(tmp_path, "tokenize").pii_kinds("any") is None  # every kind
    assert _block(tmp_path, "off").pii_kinds("any") == []
    some = _block(tmp_path, {"kinds": ["email", "PHONE"], "tools": {"docs": "off"}})
    assert some.pii_kinds("lookup") == ["EMAIL", "PHONE"]
    assert some.pii_kinds("docs") == []
    per_tool = _block(tmp_path, {"tools": {"cards": {"kinds": ["CARD"]}}})
    assert per_tool.pii_kinds("cards") == ["CARD"]
    assert per_tool.pii_kinds("other") is None


def test_an_unknown_kind_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _block(tmp_path, {"kinds": ["EMAIL", "NAME"]})
    assert "server 'crm'" in caught.value.message and "'NAME'" in caught.value.message
