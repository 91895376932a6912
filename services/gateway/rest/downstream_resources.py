"""REST for downstream servers' resources: list them (and their templates), read one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from services.gateway.ops import downstream_resources as resources
from services.gateway.rest.deps import CurrentPrincipal, State
from shared.inputs import QUERY_TEXT_MAX

router = APIRouter(prefix="/v1", tags=["resources"])


@router.get("/resources", summary="Every downstream server's resources and resource templates")
async def list_resources(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    """Each item carries its ``server``; read one with ``/v1/resources/read?server=&uri=``.
    Only servers the caller's key has a tool of are listed; a server that acts for the person
    calling lists theirs (one they have not connected: named in ``errors``)."""
    listed = await resources.list_resources(state, caller=principal)
    templates = await resources.list_resource_templates(state, caller=principal)
    return {
        "resources": listed["resources"],
        "resource_templates": templates["resourceTemplates"],
        "errors": {**templates["errors"], **listed["errors"]},
    }


@router.get("/resources/read", summary="Read one resource of one server (the MCP result)")
async def read_resource(
    state: State,
    principal: CurrentPrincipal,
    server: Annotated[
        str, Query(max_length=64, description="the server's name, as in `server:tool`")
    ],
    uri: Annotated[
        str,
        Query(
            max_length=QUERY_TEXT_MAX,
            description="the server's own URI (as resource links carry it)",
        ),
    ],
) -> dict[str, Any]:
    """``contents``: ``{uri, mimeType, text}`` or ``{uri, mimeType, blob}`` (base64)."""
    return await resources.read_resource(state, server=server, uri=uri, caller=principal)
