"""`GET /v1/connections`, `DELETE /v1/connections/{server}`: a person's connections to the
servers that act for them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from services.gateway.ops.connections import (
    list_connections,
    new_connect_link,
    revoke_connection,
)
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(prefix="/v1/connections", tags=["connections"])


@router.get("", summary="Your connections to servers that act for you (no tokens shown)")
async def connections(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    return await list_connections(state, principal=principal)


@router.delete("/{server}", status_code=204, summary="Revoke your connection to a server")
async def revoke(state: State, principal: CurrentPrincipal, server: str) -> Response:
    """Its tokens are deleted and revoked at the server's authorization server (best
    effort); your next call to it answers `authorization_required` again."""
    await revoke_connection(state, principal=principal, server=server)
    return Response(status_code=204)


@router.post("/{server}", summary="A link that connects a server to your account there")
async def connect(state: State, principal: CurrentPrincipal, server: str) -> dict[str, Any]:
    """Open `url` in a browser (once, within `expires_in` seconds) to connect the server; a
    call to one of its tools before you connected answers the same link."""
    return await new_connect_link(state, principal=principal, server=server)
