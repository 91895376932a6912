"""FastAPI dependencies (Annotated aliases) for the routes: the opened clients, the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.gateway.auth import principal_of_request
from services.gateway.state import GatewayState
from shared.auth.principal import Principal

# Both are `async def` though neither awaits: FastAPI runs a plain `def` dependency in its
# thread pool, two thread hops (~0.3 ms of the event loop's CPU each, more under load) on
# every REST request for two attribute reads.


async def get_state(request: Request) -> GatewayState:
    """The per-app state set up in the lifespan."""
    state: GatewayState = request.app.state.gateway
    return state


async def current_principal(request: Request) -> Principal:
    """The caller, set on the request by ``AuthGate``; anonymous when auth is not in use."""
    return principal_of_request(request)


State = Annotated[GatewayState, Depends(get_state)]
CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
