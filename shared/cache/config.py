"""The ``agentcards`` block an operator may add beside ``command``/``args`` of an MCP server.

``{"agentcards": {"cache": {"ttl_s": 600, "read_only": true,
"tools": {"read_file": {"ttl_s": 30}, "append_log": {"read_only": false}}}}}``: ``ttl_s: 0``
means never cache; ``read_only`` overrides the tool's ``readOnlyHint``. Other MCP clients
ignore the key; unknown keys and wrong types are refused (strict: ``"30"`` is not a number).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A week is far past any useful result lifetime; a larger number is most likely a typo.
MAX_TTL_S = 7 * 86400


class ToolCacheConfig(BaseModel):
    """Cache settings of one tool, or the defaults of every tool of a server."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ttl_s: int | None = Field(default=None, ge=0, le=MAX_TTL_S)
    read_only: bool | None = None


class ServerCacheConfig(ToolCacheConfig):
    """A server's defaults and per-tool overrides (tool-level keys win)."""

    tools: dict[str, ToolCacheConfig] = Field(default_factory=dict)


class AgentcardsBlock(BaseModel):
    """The whole ``agentcards`` block of one server."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cache: ServerCacheConfig = Field(default_factory=ServerCacheConfig)

    def cache_override(self, tool: str) -> dict[str, Any]:
        """The operator's settings for one tool: ``ttl_s`` and ``read_only`` where set."""
        merged = self.cache.model_dump(exclude={"tools"}, exclude_none=True)
        specific = self.cache.tools.get(tool)
        if specific is not None:
            merged.update(specific.model_dump(exclude_none=True))
        return merged
