"""The ASGI surface of direct federation: ``/mcp/servers/<name>`` and ``/mcp/servers``, one
streamable-HTTP session manager per endpoint, made at its first request."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.direct.listeners import Listeners
from services.gateway.mcp.direct.relay import relay
from services.gateway.mcp.direct.server import endpoint_server
from services.gateway.mcp.errors import protocol_error
from services.gateway.mcp.replicas.manager import ReplicatedSessionManager, session_manager
from services.gateway.mcp.replicas.registry import Registry
from services.gateway.ops import direct as ops
from services.gateway.state import GatewayState
from shared import tool_ids
from shared.errors import AgentCardsError, NotFound, Unavailable
from shared.tools import apps

log = logging.getLogger(__name__)


class DirectSurface:
    """The ASGI endpoints of the direct surface and the session managers behind them."""

    def __init__(
        self, get_state: Callable[[], GatewayState], *, listeners: Listeners, registry: Registry
    ) -> None:
        self._get_state = get_state
        self._listeners = listeners
        self._registry = registry
        self._managers: dict[str | None, ReplicatedSessionManager] = {}
        self._servers: dict[str, Server[Any]] = {}
        self._lock = anyio.Lock()
        self._group: TaskGroup | None = None

    def routes(self) -> list[Route]:
        """``/mcp/servers`` (every server) and ``/mcp/servers/<name>`` (one)."""
        # The surface itself: Starlette serves an object endpoint as an ASGI app (every
        # method), a function or bound method as a GET-only request handler.
        return [
            Route("/mcp/servers", endpoint=self, include_in_schema=False),
            Route("/mcp/servers/{name}", endpoint=self, include_in_schema=False),
        ]

    async def serve(self, group: TaskGroup) -> None:
        """Run the session managers made from now on in ``group`` (the app's lifespan), and
        tell clients when a server's tool list changed."""
        self._group = group
        group.start_soon(relay, self._get_state, self._listeners)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope.get("path_params", {}).get("name")
        try:
            manager = await self._manager(name)
        except AgentCardsError as exc:
            error = protocol_error(exc).error.model_dump(mode="json", exclude_none=True)
            status = 404 if isinstance(exc, NotFound) else 503
            response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status)
            await response(scope, receive, send)
            return
        if name is not None and _opens_session(scope):
            await self._refresh(name)
        await manager.handle_request(scope, receive, send)

    async def _refresh(self, name: str) -> None:
        """Before a session opens, take the server's current instructions, version, title and
        whether it offers MCP Apps (the SDK reads them from the ``Server`` when it answers
        ``initialize``)."""
        server = self._servers[name]
        try:
            found = await ops.identity(self._get_state(), server=name)
        except Exception as exc:  # the session opens with what was known before
            log.warning("direct endpoint %s: server identity not refreshed: %s", name, exc)
            return
        server.instructions = found.instructions
        server.version = found.version
        server.title = found.title
        if found.apps:  # its views and tools' _meta.ui pass through (docs/mcp-apps.md)
            server.extensions[apps.EXTENSION_ID] = {}
        else:
            server.extensions.pop(apps.EXTENSION_ID, None)

    async def _manager(self, name: str | None) -> ReplicatedSessionManager:
        if name in self._managers:
            return self._managers[name]
        if name is not None:
            servers = await ops.served_servers(self._get_state())
            if not tool_ids.is_server_name(name) or name not in servers:
                raise NotFound(
                    f"no configured MCP server {name[:80]!r} (see GET /v1/servers)",
                    server=name[:80],
                )
        async with self._lock:
            if name not in self._managers:
                if self._group is None:
                    raise Unavailable("the direct MCP surface is not running yet")
                server = endpoint_server(Endpoint(name, self._get_state, self._listeners))
                settings = self._get_state().settings
                manager = session_manager(server, registry=self._registry, settings=settings)
                if name is not None:
                    self._servers[name] = server
                await self._group.start(_keep_running, manager)
                self._managers[name] = manager
        return self._managers[name]


async def _keep_running(
    manager: StreamableHTTPSessionManager, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


def _opens_session(scope: Scope) -> bool:
    """A POST without a session id: an ``initialize`` (or a request the SDK refuses)."""
    headers = scope.get("headers") or []
    return scope.get("method") == "POST" and not any(
        key == MCP_SESSION_ID_HEADER.encode() for key, _ in headers
    )
