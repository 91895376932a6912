"""Each MCP client `agentcards connect` knows: its config file per OS, its format, its entry.

Where each client reads its servers, and under which keys, is documented in
docs/connect.md with the client's own documentation for every row. A client that reads
HTTP servers gets the gateway's ``/mcp`` URL (with the key as a header, or nothing when
people sign in with OAuth); one that reads only stdio servers (Claude Desktop's file) gets
`agentcards mcp` by absolute path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from shared.errors import ValidationFailed

ENTRY_NAME = "agentcards"  # the server's name in every client's file

Format = Literal["json", "jsonc", "toml"]
Transport = Literal["http", "stdio"]
System = Literal["Darwin", "Windows", "Linux"]


@dataclass(frozen=True)
class Platform:
    """Where a user's files live: the OS, the home folder and the environment (APPDATA, …)."""

    system: System
    home: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def current(cls) -> Platform:
        import platform

        name = platform.system()
        system: System = name if name in ("Darwin", "Windows") else "Linux"  # type: ignore[assignment]
        return cls(system=system, home=Path.home(), env=dict(os.environ))

    def appdata(self) -> Path:
        """Windows' roaming application data (``%APPDATA%``)."""
        value = self.env.get("APPDATA")
        return Path(value) if value else self.home / "AppData" / "Roaming"

    def config_home(self) -> Path:
        """Linux's ``$XDG_CONFIG_HOME`` (default ``~/.config``)."""
        value = self.env.get("XDG_CONFIG_HOME")
        return Path(value) if value and Path(value).is_absolute() else self.home / ".config"

    def app_support(self, app: str) -> Path:
        """An Electron app's user-data folder: macOS Application Support, %APPDATA%, ~/.config."""
        if self.system == "Darwin":
            return self.home / "Library" / "Application Support" / app
        if self.system == "Windows":
            return self.appdata() / app
        return self.config_home() / app


@dataclass(frozen=True)
class Client:
    """One MCP client: its file, the format it parses, and the entry it reads for a server."""

    name: str
    title: str
    fmt: Format
    servers_key: str  # the table of servers: mcpServers, servers (VS Code), mcp_servers (Codex)
    transport: Transport
    path: Callable[[Platform], Path] | None  # None: no file of its own (generic: --file)
    url_key: str = "url"
    headers_key: str = "headers"
    fixed: Mapping[str, Any] = field(default_factory=dict)  # keys every entry carries (type)
    oauth: bool = True  # follows the gateway's OAuth discovery from the URL alone

    def http_entry(self, url: str, headers: Mapping[str, str]) -> dict[str, Any]:
        """The entry that makes this client reach ``url`` with ``headers``."""
        entry: dict[str, Any] = {**self.fixed, self.url_key: url}
        if headers:
            entry[self.headers_key] = dict(headers)
        return entry

    def entry_url(self, entry: Mapping[str, Any]) -> str | None:
        value = entry.get(self.url_key)
        return value if isinstance(value, str) else None

    def entry_headers(self, entry: Mapping[str, Any]) -> dict[str, str]:
        value = entry.get(self.headers_key) or {}
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _home(*parts: str) -> Callable[[Platform], Path]:
    """A file under the home folder, on every OS (``%USERPROFILE%`` on Windows)."""
    return lambda p: p.home.joinpath(*parts)


def _codex(p: Platform) -> Path:
    """``$CODEX_HOME/config.toml``, by default ``~/.codex/config.toml``."""
    codex_home = p.env.get("CODEX_HOME")
    return (Path(codex_home) if codex_home else p.home / ".codex") / "config.toml"


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            name="claude-desktop",
            title="Claude Desktop",
            fmt="json",
            servers_key="mcpServers",
            transport="stdio",  # its file takes stdio servers only (remote ones: Connectors UI)
            path=lambda p: p.app_support("Claude") / "claude_desktop_config.json",
            oauth=False,
        ),
        Client(
            name="claude-code",
            title="Claude Code",
            fmt="json",
            servers_key="mcpServers",  # user scope: the top level of ~/.claude.json
            transport="http",
            path=_home(".claude.json"),
            fixed={"type": "http"},
        ),
        Client(
            name="vscode",
            title="VS Code",
            fmt="jsonc",
            servers_key="servers",
            transport="http",
            path=lambda p: p.app_support("Code") / "User" / "mcp.json",
            fixed={"type": "http"},
        ),
        Client(
            name="cursor",
            title="Cursor",
            fmt="json",
            servers_key="mcpServers",
            transport="http",
            path=_home(".cursor", "mcp.json"),
        ),
        Client(
            name="windsurf",
            title="Windsurf",
            fmt="json",
            servers_key="mcpServers",
            transport="http",
            path=_home(".codeium", "windsurf", "mcp_config.json"),
            url_key="serverUrl",
        ),
        Client(
            name="codex",
            title="Codex",
            fmt="toml",
            servers_key="mcp_servers",
            transport="http",
            path=_codex,
            headers_key="http_headers",  # Codex ignores `headers` and refuses `bearer_token`
        ),
        Client(
            name="gemini",
            title="Gemini CLI",
            fmt="jsonc",
            servers_key="mcpServers",
            transport="http",
            path=_home(".gemini", "settings.json"),
            url_key="httpUrl",  # `url` would mean SSE to Gemini CLI
        ),
        Client(
            name="generic",
            title="any client reading an mcpServers JSON file",
            fmt="json",
            servers_key="mcpServers",
            transport="http",
            path=None,
            fixed={"type": "http"},
        ),
    )
}


def client_named(name: str) -> Client:
    """The client called ``name``; a ValidationFailed listing the known ones otherwise."""
    try:
        return CLIENTS[name]
    except KeyError:
        raise ValidationFailed(
            f"unknown client {name!r}: choose one of {', '.join(CLIENTS)}"
        ) from None


def config_path(client: Client, platform: Platform, file: Path | None) -> Path:
    """The file to write: ``--file`` when given, else the client's own on this OS."""
    if file is not None:
        return file
    if client.path is None:
        raise ValidationFailed(
            f"{client.name} has no file of its own: give --file PATH (or --print)"
        )
    return client.path(platform)
