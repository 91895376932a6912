"""The downstream MCP servers, read from an ``mcpServers`` JSON file (the format MCP clients use).

``{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"}}}``; an
optional ``"type"`` (``stdio`` | ``http`` | ``streamable-http``) and ``"disabled"`` are
accepted because desktop clients write them. Anything else is refused with a message that
names the file, the server and the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import tool_ids
from shared.errors import ConfigError


class StdioServer(BaseModel):
    """A server the toolhost starts as a child process and talks to over stdin/stdout."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    disabled: bool = False

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio"

    def public_config(self) -> dict[str, Any]:
        """What may be stored and shown: env values are secrets more often than not."""
        return {"command": self.command, "args": self.args, "env": dict.fromkeys(self.env, "***")}


class HttpServer(BaseModel):
    """A server reached over streamable HTTP at ``url``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["http", "streamable-http", "streamableHttp"] | None = None
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    disabled: bool = False

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return v

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http"

    def public_config(self) -> dict[str, Any]:
        """What may be stored and shown: header values (tokens) are redacted."""
        return {"url": self.url, "headers": dict.fromkeys(self.headers, "***")}


ServerConfig = StdioServer | HttpServer


def load_servers(path: Path | None) -> dict[str, ServerConfig]:
    """The enabled servers of the config file (none when no file is configured)."""
    if path is None:
        return {}
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"MCP config {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    return parse_servers(data, source=str(path))


def parse_servers(data: Any, *, source: str = "MCP config") -> dict[str, ServerConfig]:
    """Validate an already-decoded config; every error names the server and the key."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError(f'{source}: expected an object {{"mcpServers": {{"name": {{...}}}}}}')
    unknown = sorted(set(data) - {"mcpServers"})
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {', '.join(unknown)}")
    servers: dict[str, ServerConfig] = {}
    for name, raw in data["mcpServers"].items():
        if not tool_ids.is_server_name(name):
            raise ConfigError(
                f"{source}: server name {name!r} is not allowed: {tool_ids.SERVER_NAME_RULE}"
            )
        if name.startswith("_"):
            raise ConfigError(
                f"{source}: server name {name!r} is not allowed: a leading '_' is reserved "
                "for in-process servers"
            )
        config = _parse_one(name, raw, source=source)
        if not config.disabled:
            servers[name] = config
    return servers


def _parse_one(name: str, raw: Any, *, source: str) -> ServerConfig:
    where = f"{source}: server {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object with 'command' or 'url'")
    if "command" in raw and "url" in raw:
        raise ConfigError(f"{where}: give either 'command' (stdio) or 'url' (HTTP), not both")
    if "url" in raw or raw.get("type") in {"http", "streamable-http", "streamableHttp"}:
        model: type[StdioServer] | type[HttpServer] = HttpServer
    elif "command" in raw or raw.get("type") in {None, "stdio"}:
        model = StdioServer
    else:
        raise ConfigError(f"{where}: unsupported type {raw.get('type')!r} (stdio or http)")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(server)"
        if first["type"] == "missing":
            kind = "a stdio" if model is StdioServer else "an HTTP"
            raise ConfigError(f"{where}: missing '{key}' ({kind} server needs it)") from exc
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"{where}: unknown key '{key}'") from exc
        raise ConfigError(f"{where}: '{key}': {first['msg']}") from exc
