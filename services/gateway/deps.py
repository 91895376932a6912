"""FastAPI dependencies (Annotated aliases) for the gateway's routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.gateway.config import GatewayState


def get_state(request: Request) -> GatewayState:
    """The per-app state set up in the lifespan."""
    state: GatewayState = request.app.state.gateway
    return state


State = Annotated[GatewayState, Depends(get_state)]
