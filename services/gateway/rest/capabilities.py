"""REST for capabilities: search by intent (adaptive threshold), list with filters, and execute with checked args."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from services.gateway.ops import capabilities as service
from services.gateway.ops import capability_admin
from services.gateway.ops.models.capabilities import (
    CapabilityExecuteRequest,
    CapabilityList,
    CapabilitySearchRequest,
    CapabilitySearchResponse,
)
from services.gateway.rest.deps import CurrentPrincipal, State
from services.gateway.rest.responses import execution_response
from shared.capabilities.listing import CapabilityFilter, Sort
from shared.inputs import SQL_INT_MAX

router = APIRouter(tags=["capabilities"])

Row = dict[str, Any]


@router.post("/v1/capabilities/search", summary="Find proven code for an intent")
async def search(
    state: State, principal: CurrentPrincipal, body: CapabilitySearchRequest
) -> CapabilitySearchResponse:
    """The tenant's capabilities scored semantic * reliability at or above the adaptive threshold."""
    return await service.search_capabilities(state, body=body, principal=principal)


@router.post(
    "/v1/capabilities/{capability_ref}/execute",
    summary="Run a capability (by id or name) with arguments checked against its schema",
)
async def execute(
    state: State,
    principal: CurrentPrincipal,
    capability_ref: str,
    body: CapabilityExecuteRequest,
    wait: bool = Query(False),
) -> Response:
    """202 with the queued execution, or 200 with the finished one (or a cache hit)."""
    if wait:
        body = body.model_copy(update={"wait": True})
    row = await service.execute_capability(
        state, ref=capability_ref, body=body, principal=principal
    )
    return execution_response(row)


@router.get(
    "/api/capabilities",
    summary="The tenant's capabilities: filter, search, sort, page",
    response_model=CapabilityList,
)
async def list_capabilities(
    state: State,
    principal: CurrentPrincipal,
    community_id: int | None = Query(
        None, ge=0, le=SQL_INT_MAX, description="in this tool-graph community"
    ),
    min_success_rate: float | None = Query(None, ge=0.0, le=1.0),
    min_usage: int | None = Query(
        None, ge=0, le=SQL_INT_MAX, description="used at least this many times"
    ),
    q: str | None = Query(
        None, max_length=200, description="in name, description, intent or alias"
    ),
    server: str | None = Query(None, max_length=64, description="uses a tool of this MCP server"),
    tool: str | None = Query(
        None, max_length=200, description="uses this tool (`server:tool` or name)"
    ),
    sort: Sort = Query(Sort.USAGE, description="highest or latest first"),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=SQL_INT_MAX),
) -> Row:
    filters = CapabilityFilter(
        community_id=community_id,
        min_success_rate=min_success_rate,
        min_usage=min_usage,
        q=q,
        server=server,
        tool=tool,
    )
    return await capability_admin.list_capabilities(
        state,
        tenant_id=principal.tenant_id,
        filters=filters,
        sort=sort,
        limit=limit,
        offset=offset,
    )
