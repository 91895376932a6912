"""REST for downstream servers' resources: list them (and their templates), read one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from services.gateway import resources
from services.gateway.deps import State

router = APIRouter(prefix="/v1", tags=["resources"])


@router.get("/resources", summary="Every downstream server's resources and resource templates")
async def list_resources(state: State) -> dict[str, Any]:
    """Each item carries its ``server``; read one with ``/v1/resources/read?server=&uri=``."""
    listed = await resources.list_resources(state)
    templates = await resources.list_resource_templates(state)
    return {
        "resources": listed["resources"],
        "resource_templates": templates["resourceTemplates"],
        "errors": {**templates["errors"], **listed["errors"]},
    }


@router.get("/resources/read", summary="Read one resource of one server (the MCP result)")
async def read_resource(
    state: State,
    server: Annotated[str, Query(description="the server's name, as in `server:tool`")],
    uri: Annotated[str, Query(description="the server's own URI (as resource links carry it)")],
) -> dict[str, Any]:
    """``contents``: ``{uri, mimeType, text}`` or ``{uri, mimeType, blob}`` (base64)."""
    return await resources.read_resource(state, server=server, uri=uri)
