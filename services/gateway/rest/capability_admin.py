"""REST for managing capabilities: create, show, edit, versions, delete, export, import.

Every route is the caller's tenant's only: another tenant's id is a 404, never a leak.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from services.gateway.ops import capability_admin as ops
from services.gateway.ops.models.capabilities import (
    CapabilityCreate,
    CapabilityDetail,
    CapabilityItem,
    CapabilityPatch,
    ImportResult,
)
from services.gateway.rest.deps import CurrentPrincipal, State
from shared.capabilities import bundle, manual
from shared.inputs import QUERY_TEXT_MAX

router = APIRouter(tags=["capabilities"])

Row = dict[str, Any]


@router.post(
    "/v1/capabilities",
    status_code=201,
    summary="Add a capability by hand (code + intent; schema inferred; never pruned)",
    response_model=CapabilityItem,
)
async def create_capability(
    state: State, principal: CurrentPrincipal, body: CapabilityCreate
) -> Row:
    """201 with the capability; 409 when the tenant already has this code."""
    spec = manual.ManualCapability(**body.model_dump())
    return await ops.create_capability(state, tenant_id=principal.tenant_id, spec=spec)


@router.get(
    "/v1/capabilities/export",
    summary="A JSON bundle of the given capabilities (`?ids=a,b`) or all, with schemas and stats",
)
async def export_capabilities(
    state: State,
    principal: CurrentPrincipal,
    ids: str | None = Query(
        None,
        max_length=QUERY_TEXT_MAX,
        description="comma-separated ids (about 100 at most); all if absent",
    ),
) -> Row:
    wanted = [i.strip() for i in ids.split(",") if i.strip()] if ids is not None else None
    return await ops.export_capabilities(state, tenant_id=principal.tenant_id, ids=wanted)


@router.post(
    "/v1/capabilities/import",
    summary="Add a bundle's capabilities; code you already have is merged, not doubled",
    response_model=ImportResult,
)
async def import_capabilities(
    state: State, principal: CurrentPrincipal, body: bundle.Bundle
) -> Row:
    return await ops.import_capabilities(state, tenant_id=principal.tenant_id, body=body)


@router.get(
    "/v1/capabilities/{capability_id}",
    summary="One capability by id, or the latest version of a name, and who taught it",
    response_model=CapabilityDetail,
)
async def get_capability(state: State, principal: CurrentPrincipal, capability_id: str) -> Row:
    return await ops.get_capability(state, tenant_id=principal.tenant_id, ref=capability_id)


@router.patch(
    "/v1/capabilities/{capability_id}",
    summary="Rename, redescribe, re-intent or re-alias a capability",
    response_model=CapabilityItem,
)
async def patch_capability(
    state: State, principal: CurrentPrincipal, capability_id: str, body: CapabilityPatch
) -> Row:
    return await ops.edit_capability(
        state,
        tenant_id=principal.tenant_id,
        capability_id=capability_id,
        changes=body.model_dump(exclude_unset=True),
    )


@router.get(
    "/v1/capabilities/{capability_id}/versions",
    summary="Every version of a capability's name, oldest first (each runnable by id)",
)
async def capability_versions(state: State, principal: CurrentPrincipal, capability_id: str) -> Row:
    return await ops.capability_versions(
        state, tenant_id=principal.tenant_id, capability_id=capability_id
    )


@router.delete(
    "/v1/capabilities/{capability_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a capability (its aliases and cached results go with it)",
)
async def delete_capability(
    state: State, principal: CurrentPrincipal, capability_id: str
) -> Response:
    await ops.delete_capability(state, tenant_id=principal.tenant_id, capability_id=capability_id)
    return Response(status_code=204)
