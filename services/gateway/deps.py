"""FastAPI dependencies (Annotated aliases) for the gateway's routes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from mcp.server.mcpserver import Context

from services.gateway.config import GatewayState
from shared.auth.principal import ANONYMOUS, Principal


def get_state(request: Request) -> GatewayState:
    """The per-app state set up in the lifespan."""
    state: GatewayState = request.app.state.gateway
    return state


State = Annotated[GatewayState, Depends(get_state)]


def get_principal(request: Request) -> Principal:
    """The caller, set on the request by the auth layer; anonymous when auth is not in use."""
    principal: Principal = getattr(request.state, "principal", ANONYMOUS)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def mcp_principal(ctx: Context[Any, Any]) -> Principal:
    """The caller of an MCP tool: its HTTP request's principal; anonymous over stdio (no request)."""
    request = ctx.request_context.request
    return get_principal(request) if isinstance(request, Request) else ANONYMOUS
