"""Tool ids (``server:tool``) and server names: the one rule config, gateway, bridge and RPC check.

Server names are ``mcpServers`` keys; agent code writes them as ``mcp.<server>`` and they
are the part before ``:`` in tool ids, so they hold no dots or colons (``mcp.a.b.tool``
would read as server ``a``). Tool names follow the MCP spec's tool-name rule (letters,
digits, ``_``, ``-``, ``.``; 1-128 characters). Stdlib only, like shared.errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

# A leading "_" is reserved for in-process servers (`bench rpc`'s `_bench`); config files may not use it.
SERVER_NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}"
TOOL_NAME_PATTERN = r"[A-Za-z0-9_.-]{1,128}"  # MCP spec 2025-11-25, "Tool names"
TOOL_ID_PATTERN = rf"^{SERVER_NAME_PATTERN}:{TOOL_NAME_PATTERN}$"

SERVER_NAME_RULE = (
    "server names are 1-64 letters, digits, '_' or '-' and do not start with '-' "
    "(agent code writes them as mcp.<server>, so no dots or colons)"
)
TOOL_NAME_RULE = "tool names are 1-128 letters, digits, '_', '-' or '.' (the MCP tool-name rule)"
TOOL_ID_RULE = f"tool ids look like 'server:tool'; {SERVER_NAME_RULE}; {TOOL_NAME_RULE}"

_SERVER_NAME = re.compile(rf"^{SERVER_NAME_PATTERN}$")
_TOOL_NAME = re.compile(rf"^{TOOL_NAME_PATTERN}$")
_TOOL_ID = re.compile(TOOL_ID_PATTERN)


class ToolId(NamedTuple):
    """A parsed ``server:tool`` id."""

    server: str
    name: str

    def __str__(self) -> str:
        return f"{self.server}:{self.name}"


def is_server_name(name: str) -> bool:
    """True when ``name`` may name an MCP server."""
    return bool(_SERVER_NAME.match(name))


def is_tool_name(name: str) -> bool:
    """True when ``name`` may name a tool on a server."""
    return bool(_TOOL_NAME.match(name))


def is_tool_id(tool_id: str) -> bool:
    """True when ``tool_id`` is a well-formed ``server:tool``."""
    return bool(_TOOL_ID.match(tool_id))


def parse(tool_id: str) -> ToolId:
    """Split ``server:tool``; raises ValueError naming the rule when it is malformed."""
    if not is_tool_id(tool_id):
        raise ValueError(f"invalid tool id {tool_id[:200]!r}: {TOOL_ID_RULE}")
    server, _, name = tool_id.partition(":")
    return ToolId(server, name)


def make(server: str, name: str) -> str:
    """The tool id of tool ``name`` on ``server`` (not checked: see ``is_tool_id``)."""
    return f"{server}:{name}"


def python_name(name: str) -> str:
    """How agent code writes a server or tool name as an attribute (``mcp.my_server.get_sum``).

    The rule is ``-`` and ``.`` become ``_`` (``get-sum`` -> ``get_sum``, ``v1.list`` -> ``v1_list``);
    the exact name stays reachable by subscript: ``mcp["my-server"]["get-sum"]``.
    """
    return name.replace("-", "_").replace(".", "_")


def python_id(tool_id: str) -> str:
    """The id agent code produces for a tool through attribute access: both parts mapped by ``python_name``."""
    server, _, name = tool_id.partition(":")
    return f"{python_name(server)}:{python_name(name)}"


def same_python_name(a: str, b: str) -> bool:
    """True when two tool ids read the same as ``mcp.<server>.<tool>`` attributes."""
    return python_id(a) == python_id(b)


def python_name_clashes(names: Iterable[str]) -> dict[str, list[str]]:
    """Names that map to the same Python name, by the name kept: the first listed keeps it.

    Agent code could not tell them apart as attributes, so the toolhost lists only the first
    (``{"get-sum": ["get_sum"]}`` when a server lists ``get-sum`` then ``get_sum``).
    """
    first: dict[str, str] = {}
    clashes: dict[str, list[str]] = {}
    for name in names:
        kept = first.setdefault(python_name(name), name)
        if kept != name:
            clashes.setdefault(kept, []).append(name)
    return clashes
