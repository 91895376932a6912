"""The principal a request runs as: its tenant, its key and what that key may do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.config import DEFAULT_TENANT

# What a key's `/mcp` serves when the request does not say (README "Code mode or direct"):
# code mode's tools, every server's tools directly (`<server>.<tool>`), or both.
McpMode = Literal["code", "direct", "both"]
MCP_MODES: tuple[McpMode, ...] = ("code", "direct", "both")


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller; every tenant-scoped read and write uses ``tenant_id``.

    ``None`` in a limit means "no limit"; ``tool_patterns`` of ``None`` means every tool
    (patterns are ``server:*``, ``server:tool`` or globs over ``server:tool`` ids).
    """

    tenant_id: str
    key_id: str | None = None
    tool_patterns: tuple[str, ...] | None = None
    executions_per_min: int | None = None
    tool_calls_per_min: int | None = None
    max_concurrent: int | None = None
    admin: bool = True
    mcp_mode: McpMode | None = None  # None: code mode


# The caller when no API key exists (loopback-only serving) or auth is explicitly off.
ANONYMOUS = Principal(tenant_id=DEFAULT_TENANT)
