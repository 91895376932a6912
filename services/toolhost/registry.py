"""Which backend serves which tool id: the MCP server connections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from shared import tool_ids

if TYPE_CHECKING:
    from services.toolhost.upstream import CallContext


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a backend answered: a value, or the server's own error text (``isError``)."""

    ok: bool
    value: Any = None
    error: str | None = None


class ServerUnavailable(Exception):
    """Raised when the tool's server is down, still connecting, or died mid-call."""


class AuthorizationRequired(Exception):
    """Raised when the server acts for the person calling and has no credential of theirs;
    ``url``: where they connect it (a connect link), when connecting is what it takes."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class UnknownTool(Exception):
    """Raised when no configured server offers the tool."""


class Backend(Protocol):
    """A server the toolhost can call tools on."""

    name: str

    @property
    def state(self) -> str: ...

    async def call_tool(
        self, tool: str, args: dict[str, Any], *, context: CallContext | None = None
    ) -> ToolResult:
        """Run one tool for ``context``'s execution; raises ServerUnavailable or UnknownTool, never times out by itself."""
        ...


class ToolRegistry:
    """Maps ``server:tool`` ids to backends; callers enforce deadlines around ``call_tool``."""

    def __init__(self) -> None:
        self._backends: dict[str, Backend] = {}

    def add(self, backend: Backend) -> None:
        """Register a backend under its server name (names are unique per process)."""
        if backend.name in self._backends:
            raise ValueError(f"server {backend.name!r} registered twice")
        self._backends[backend.name] = backend

    def remove(self, server: str) -> None:
        """Unregister ``server`` (it left the configuration); calls to it are UnknownTool."""
        self._backends.pop(server, None)

    def backends(self) -> list[Backend]:
        """Every registered backend."""
        return list(self._backends.values())

    def get(self, server: str) -> Backend | None:
        """The backend registered as ``server``, if any."""
        return self._backends.get(server)

    def resolve(self, tool_id: str) -> tuple[Backend, str]:
        """The backend and the tool's own name; UnknownTool if the server is not configured."""
        try:
            server, name = tool_ids.parse(tool_id)
        except ValueError as exc:
            raise UnknownTool(str(exc)) from None
        backend = self._backends.get(server)
        if backend is None:
            raise UnknownTool(f"no configured MCP server named {server!r} (tool {tool_id})")
        return backend, name
