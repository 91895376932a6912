"""FastAPI dependencies (Annotated aliases) for the gateway's routes."""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import Depends, Request

from services.gateway.auth import resolve_sync
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


async def request_principal(
    request: object, *, state: GatewayState, stdio_key: str | None
) -> Principal:
    """The caller of an MCP request: the HTTP request's principal (set by the auth layer), or
    over stdio the principal of ``stdio_key`` (AGENTCARDS_API_KEY), re-checked through the
    cache so a revoked key stops working within seconds."""
    if isinstance(request, Request):
        return get_principal(request)
    if not state.settings.auth:
        return ANONYMOUS
    return await to_thread.run_sync(lambda: resolve_sync(state.auth, token=stdio_key, state=state))
