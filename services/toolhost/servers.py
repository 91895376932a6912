"""The downstream MCP servers, read from an ``mcpServers`` JSON file (the format MCP clients use).

``{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"}}}``; an
optional ``"type"`` (``stdio`` | ``http`` | ``streamable-http``) and ``"disabled"`` are
accepted because desktop clients write them; ``"agentcards"`` holds our own settings
(``shared.cache.config``: cache TTLs and read-only overrides; other clients ignore it).
``"roots"`` (absolute paths or ``file://`` URIs) is what the toolhost answers the server's
``roots/list`` with; it defaults to no roots, so a server keeps the directories it was
started with (the filesystem server's arguments) and the gateway never widens them.
``"auth"``: ``{"type": "token-exchange", "audience", "scopes"}`` or ``{"type": "oauth"}`` on
an HTTP server makes it act for the person calling (services/toolhost/peruser.py). ``"protocol"``: ``"auto"`` (the default: 2026-07-28 when the server answers
``server/discover`` with it, else 2025-11-25) or ``"2025-11-25"`` (always the handshake: for
a server that supports 2026-07-28 yet asks its client mid-call the old way, e.g. an SDK
``MCPServer`` tool calling ``ctx.elicit``; see docs/mcp-input-required.md).
Anything else is refused with a message that
names the file, the server and the key.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import tool_ids
from shared.cache.config import AgentcardsBlock
from shared.errors import ConfigError
from shared.graph.edges import CAPABILITY_PREFIX


def _file_uris(roots: list[str]) -> list[str]:
    """Roots as ``file://`` URIs; an entry is an absolute path or already such a URI."""
    uris = []
    for root in roots:
        if root.startswith("file://"):
            uris.append(root)
        elif PurePosixPath(root).is_absolute():
            uris.append(PurePosixPath(root).as_uri())
        else:
            raise ValueError(f"root {root!r} must be an absolute path or a file:// URI")
    return uris


# Which revision the toolhost may speak to a server (services/toolhost/rounds.py).
Protocol = Literal["auto", "2025-11-25"]


class StdioServer(BaseModel):
    """A server the toolhost starts as a child process and talks to over stdin/stdout."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    roots: list[str] = Field(default_factory=list)
    protocol: Protocol = "auto"
    disabled: bool = False
    agentcards: AgentcardsBlock = Field(default_factory=AgentcardsBlock)

    _roots = field_validator("roots")(_file_uris)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio"

    def public_config(self) -> dict[str, Any]:
        """What may be stored and shown: env values are secrets more often than not."""
        return {"command": self.command, "args": self.args, "env": dict.fromkeys(self.env, "***")}


class TokenExchangeAuth(BaseModel):
    """The server acts for the person calling: the toolhost exchanges their access token at the
    gateway's issuer (RFC 8693) for one naming ``audience`` and ``scopes``, and sends that on
    their calls only (docs/upstream-identity.md)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["token-exchange"]
    audience: str = Field(min_length=1)
    scopes: list[str] = Field(default_factory=list)


class OAuthAuth(BaseModel):
    """The server has an authorization server of its own: each person connects it once
    (OAuth, discovered from the server's 401), and their calls carry their own token
    (docs/upstream-identity.md). ``scopes``: what to ask for (default: what the server names)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["oauth"]
    scopes: list[str] = Field(default_factory=list)


UpstreamAuth = Annotated[TokenExchangeAuth | OAuthAuth, Field(discriminator="type")]


class HttpServer(BaseModel):
    """A server reached over streamable HTTP at ``url``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["http", "streamable-http", "streamableHttp"] | None = None
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    roots: list[str] = Field(default_factory=list)
    protocol: Protocol = "auto"
    disabled: bool = False
    agentcards: AgentcardsBlock = Field(default_factory=AgentcardsBlock)
    auth: UpstreamAuth | None = None

    _roots = field_validator("roots")(_file_uris)

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
        shown: dict[str, Any] = {"url": self.url, "headers": dict.fromkeys(self.headers, "***")}
        if self.auth is not None:
            shown["auth"] = self.auth.model_dump()
        return shown


ServerConfig = StdioServer | HttpServer


def load_servers(path: Path | None) -> dict[str, ServerConfig]:
    """The enabled servers of the config file (none when no file is configured).

    Every error names the file, the line and the column of what is wrong.
    """
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
            f"MCP config {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            file=str(path), line=exc.lineno, column=exc.colno,
        ) from exc  # fmt: skip
    try:
        return _parse(data)
    except _Invalid as exc:
        line, column = json_position(text, exc.at)
        raise ConfigError(
            f"MCP config {path} line {line} column {column}: {exc.text}",
            file=str(path), line=line, column=column,
        ) from exc  # fmt: skip


def parse_servers(data: Any, *, source: str = "MCP config") -> dict[str, ServerConfig]:
    """Validate an already-decoded config; every error names the server and the key."""
    try:
        return _parse(data)
    except _Invalid as exc:
        raise ConfigError(f"{source}: {exc.text}", at=list(exc.at)) from exc


class _Invalid(Exception):
    """What is wrong (``text``) and where: ``at`` is the JSON path of the offending key."""

    def __init__(self, at: tuple[str | int, ...], text: str) -> None:
        super().__init__(text)
        self.at = at
        self.text = text


def _parse(data: Any) -> dict[str, ServerConfig]:
    if not isinstance(data, dict):
        raise _Invalid((), 'expected an object {"mcpServers": {"name": {...}}}')
    if "mcpServers" not in data:
        found = ", ".join(repr(k) for k in data) or "none"
        at: tuple[str, ...] = (next(iter(data)),) if data else ()
        raise _Invalid(at, f'expected the top-level key "mcpServers" (found {found})')
    if not isinstance(data["mcpServers"], dict):
        raise _Invalid(("mcpServers",), '"mcpServers" must be an object {"name": {...}}')
    unknown = sorted(set(data) - {"mcpServers"})
    if unknown:
        raise _Invalid((unknown[0],), f"unknown top-level key(s) {', '.join(unknown)}")
    servers: dict[str, ServerConfig] = {}
    python_names: dict[str, str] = {}  # mcp.<python name> -> the server name that has it
    for name, raw in data["mcpServers"].items():
        if not tool_ids.is_server_name(name):
            raise _Invalid(
                ("mcpServers", name),
                f"server name {name!r} is not allowed: {tool_ids.SERVER_NAME_RULE}",
            )
        if name.startswith("_"):
            raise _Invalid(
                ("mcpServers", name),
                f"server name {name!r} is not allowed: a leading '_' is reserved "
                "for in-process servers",
            )
        if f"{name}:" == CAPABILITY_PREFIX:
            raise _Invalid(
                ("mcpServers", name),
                f"server name {name!r} is not allowed: '{CAPABILITY_PREFIX}<id>' names a "
                "capability in the tool graph, so its tools would read as capabilities",
            )
        config = _parse_one(name, raw)
        if config.disabled:
            continue
        clash = python_names.setdefault(tool_ids.python_name(name), name)
        if clash != name:
            raise _Invalid(
                ("mcpServers", name),
                f"server names {clash!r} and {name!r} both read as "
                f"mcp.{tool_ids.python_name(name)} in agent code ('-' reads as '_'); rename one",
            )
        servers[name] = config
    return servers


def _parse_one(name: str, raw: Any) -> ServerConfig:
    at: tuple[str | int, ...] = ("mcpServers", name)
    where = f"server {name!r}"
    if not isinstance(raw, dict):
        raise _Invalid(at, f"{where}: expected an object with 'command' or 'url'")
    if "command" in raw and "url" in raw:
        raise _Invalid(at, f"{where}: give either 'command' (stdio) or 'url' (HTTP), not both")
    if "url" in raw or raw.get("type") in {"http", "streamable-http", "streamableHttp"}:
        model: type[StdioServer] | type[HttpServer] = HttpServer
    elif "command" in raw or raw.get("type") in {None, "stdio"}:
        model = StdioServer
    else:
        raise _Invalid(
            (*at, "type"), f"{where}: unsupported type {raw.get('type')!r} (stdio or http)"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(server)"
        if first["type"] == "missing":
            kind = "a stdio" if model is StdioServer else "an HTTP"
            text = f"{where}: missing '{key}' ({kind} server needs it)"
            extra = next((e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"), None)
            if extra:  # most likely a typo of the missing key: point at it
                text += f"; unknown key '{'.'.join(str(p) for p in extra)}'"
                at = (*at, *extra)
            raise _Invalid(at, text) from exc
        inside = (*at, *first["loc"])
        if first["type"] == "extra_forbidden":
            raise _Invalid(inside, f"{where}: unknown key '{key}'") from exc
        raise _Invalid(inside, f"{where}: '{key}': {first['msg']}") from exc


def json_position(text: str, at: tuple[str | int, ...]) -> tuple[int, int]:
    """1-based line and column of the key (or list item) at JSON path ``at`` in valid ``text``.

    Walks as far down the path as the document goes; the root when ``at`` is empty.
    """
    decoder = json.JSONDecoder()
    pos = found = _skip_space(text, 0)
    for step in at:
        opener = text[pos : pos + 1]
        if opener not in {"{", "["}:
            break
        pos, index, hit = _skip_space(text, pos + 1), 0, False
        key: str | int
        while text[pos : pos + 1] not in {"}", "]", ""}:
            item_at, key = pos, index  # a list item is found by its index
            if opener == "{":
                key, pos = _scan_string(text, pos + 1)
                pos = _skip_space(text, _skip_space(text, pos) + 1)  # past the ':'
            if key == step:
                found, hit = item_at, True
                break
            _, pos = decoder.raw_decode(text, pos)
            pos = _skip_space(text, pos)
            if text[pos : pos + 1] == ",":
                pos = _skip_space(text, pos + 1)
            index += 1
        if not hit:
            break
    line = text.count("\n", 0, found) + 1
    return line, found - (text.rfind("\n", 0, found) + 1) + 1


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _scan_string(text: str, pos: int) -> tuple[str, int]:
    """The JSON string starting after the quote at ``pos - 1``, and the index past it."""
    value, end = json.decoder.scanstring(text, pos)  # type: ignore[attr-defined]
    return str(value), int(end)
