"""FastAPI dependencies (Annotated aliases) for the routes: the opened clients, the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.gateway.auth import principal_of_request
from services.gateway.state import GatewayState
from shared.auth.principal import Principal


def get_state(request: Request) -> GatewayState:
    """The per-app state set up in the lifespan."""
    state: GatewayState = request.app.state.gateway
    return state


State = Annotated[GatewayState, Depends(get_state)]
CurrentPrincipal = Annotated[Principal, Depends(principal_of_request)]
