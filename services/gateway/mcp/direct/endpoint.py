"""One direct endpoint as its request handlers see it: the server it serves (None: the
aggregate), the caller of a request, and the connections that hear of its changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext

from services.gateway.mcp.caller import request_principal
from services.gateway.mcp.direct.listeners import Listeners
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import downstream_resources as downstream
from services.gateway.state import GatewayState
from shared.auth.principal import Principal


@dataclass(frozen=True)
class Endpoint:
    """``/mcp/servers/<name>`` (``name`` None: ``/mcp/servers``, every server's)."""

    name: str | None
    get_state: Callable[[], GatewayState]
    listeners: Listeners

    async def principal(self, ctx: ServerRequestContext[Any]) -> Principal:
        """The request's caller; an unknown or revoked key is a JSON-RPC error."""
        with protocol_errors():
            return await request_principal(ctx.request, state=self.get_state(), stdio_key=None)

    def listen(self, ctx: ServerRequestContext[Any]) -> None:
        """The request's connection is told when this endpoint's lists change."""
        self.listeners.listen(self.name, ctx)

    def resource_of(self, uri: str) -> tuple[str, str]:
        """(server, the server's URI) of a resource as this endpoint names it (the aggregate:
        ``agentcards://<server>/<uri>``)."""
        return (self.name, uri) if self.name is not None else downstream.split_gateway_uri(uri)
