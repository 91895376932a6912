"""The ``agentcards`` block an operator may add beside ``command``/``args`` of an MCP server.

``{"agentcards": {"cache": {"ttl_s": 600, "read_only": true,
"tools": {"read_file": {"ttl_s": 30}, "append_log": {"read_only": false}}}}}``: ``ttl_s`` is how
long a read-only tool's results may be reused (unset or ``0``: never, shared/cache/policy.py);
``read_only`` overrides the tool's ``readOnlyHint``. Other MCP clients
ignore the key; unknown keys and wrong types are refused (strict: ``"30"`` is not a number).

``"pii"`` (docs/privacy.md): ``"off"`` for a server whose data is public, ``{"kinds":
["EMAIL", "PHONE"]}`` to tokenise only those kinds, and per tool under ``"tools"``
(``{"pii": {"tools": {"search": "off"}}}``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.privacy.tokens import kinds_of

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


class PiiKinds(BaseModel):
    """The kinds to tokenise in a tool's data: ``"tokenize"`` (every kind), ``"off"`` (none)
    or ``{"kinds": [...]}``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kinds: list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _word(cls, data: Any) -> Any:
        if data == "off":
            return {"kinds": []}
        if data == "tokenize":
            return {}
        if isinstance(data, str):
            raise ValueError(f'{data!r} is not "off", "tokenize" or {{"kinds": [...]}}')
        return data

    @field_validator("kinds")
    @classmethod
    def _known(cls, kinds: list[str] | None) -> list[str] | None:
        return None if kinds is None else sorted(k.value for k in kinds_of(kinds))


class ServerPiiConfig(PiiKinds):
    """A server's privacy setting and per-tool overrides (tool-level wins)."""

    tools: dict[str, PiiKinds] = Field(default_factory=dict)


class RegistryOrigin(BaseModel):
    """Where `agentcards servers add` found the server: its MCP Registry name and version."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    version: str
    registry: str | None = None  # the registry's base URL; None: a local server.json


class AgentcardsBlock(BaseModel):
    """The whole ``agentcards`` block of one server."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cache: ServerCacheConfig = Field(default_factory=ServerCacheConfig)
    pii: ServerPiiConfig = Field(default_factory=ServerPiiConfig)
    registry: RegistryOrigin | None = None

    def pii_kinds(self, tool: str) -> list[str] | None:
        """The kinds tokenised in this tool's data: None for every kind (the default), ``[]``
        for none (``"off"``)."""
        specific = self.pii.tools.get(tool)
        return specific.kinds if specific is not None else self.pii.kinds

    def cache_override(self, tool: str) -> dict[str, Any]:
        """The operator's settings for one tool: ``ttl_s`` and ``read_only`` where set."""
        merged = self.cache.model_dump(exclude={"tools"}, exclude_none=True)
        specific = self.cache.tools.get(tool)
        if specific is not None:
            merged.update(specific.model_dump(exclude_none=True))
        return merged
