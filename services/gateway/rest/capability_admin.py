"""REST for managing capabilities: create, show, edit, versions, delete, export, import.

Every route is the caller's tenant's only: another tenant's id is a 404, never a leak.
What changes is announced on the tenant's event stream (``GET /v1/events``) after commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from fastapi import APIRouter, Query
from fastapi.responses import Response

from services.gateway.ops.capability_admin import announce, item_json
from services.gateway.ops.db import in_pool
from services.gateway.ops.models.capabilities import (
    CapabilityCreate,
    CapabilityItem,
    CapabilityPatch,
    ImportResult,
)
from services.gateway.rest.deps import CurrentPrincipal, State
from services.gateway.state import GatewayState
from shared.capabilities import bundle, lifecycle, manual
from shared.embeddings import Embedder, get_embedder
from shared.errors import NotFound, ValidationFailed
from shared.events import bus
from shared.inputs import QUERY_TEXT_MAX

router = APIRouter(tags=["capabilities"])

Row = dict[str, Any]
Conn = psycopg.Connection[Any]
T = TypeVar("T")


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
    return await _write(
        state,
        principal.tenant_id,
        bus.EventType.CAPABILITY_LEARNED,
        lambda conn, embedder: manual.create_manual(
            conn, tenant_id=principal.tenant_id, spec=spec, embedder=embedder
        )[0],
    )


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
    exported = await in_pool(
        state, lambda conn: bundle.export_bundle(conn, tenant_id=principal.tenant_id, ids=wanted)
    )
    if wanted is not None:
        missing = sorted(set(wanted) - {c["id"] for c in exported["capabilities"]})
        if missing:
            raise NotFound(
                f"no capabilities with ids {', '.join(missing)}: list yours with "
                "GET /api/capabilities",
                ids=missing,
            )
    return exported


@router.post(
    "/v1/capabilities/import",
    summary="Add a bundle's capabilities; code you already have is merged, not doubled",
    response_model=ImportResult,
)
async def import_capabilities(
    state: State, principal: CurrentPrincipal, body: bundle.Bundle
) -> Row:
    done: list[Row] = await _in_thread(
        state,
        lambda conn, embedder: bundle.import_bundle(
            conn, tenant_id=principal.tenant_id, bundle=body, embedder=embedder
        ),
    )
    bus.publish_many(
        state.redis,
        events=[
            (
                principal.tenant_id,
                bus.EventType.CAPABILITY_LEARNED
                if d["status"] == "created"
                else bus.EventType.CAPABILITY_UPDATED,
                {"capability_id": d["id"], "name": d["name"], "version": d["version"]},
            )
            for d in done
        ],
    )
    created = sum(1 for d in done if d["status"] == "created")
    return {"created": created, "merged": len(done) - created, "capabilities": done}


@router.get(
    "/v1/capabilities/{capability_id}",
    summary="One capability by id, or the latest version of a name",
    response_model=CapabilityItem,
)
async def get_capability(state: State, principal: CurrentPrincipal, capability_id: str) -> Row:
    tenant_id = principal.tenant_id
    found = await in_pool(
        state, lambda conn: manual.get_or_404(conn, tenant_id=tenant_id, ref=capability_id)
    )
    return item_json(found)


@router.patch(
    "/v1/capabilities/{capability_id}",
    summary="Rename, redescribe, re-intent or re-alias a capability",
    response_model=CapabilityItem,
)
async def patch_capability(
    state: State, principal: CurrentPrincipal, capability_id: str, body: CapabilityPatch
) -> Row:
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise ValidationFailed(
            "nothing to change: give any of name, description, intent, aliases", field="body"
        )
    if "name" in changes and changes["name"] is None:
        raise ValidationFailed("name: must not be null", field="name")

    return await _write(
        state,
        principal.tenant_id,
        bus.EventType.CAPABILITY_UPDATED,
        lambda conn, embedder: manual.edit(
            conn,
            tenant_id=principal.tenant_id,
            capability_id=capability_id,
            changes=changes,
            embedder=embedder,
        ),
    )


@router.get(
    "/v1/capabilities/{capability_id}/versions",
    summary="Every version of a capability's name, oldest first (each runnable by id)",
)
async def capability_versions(state: State, principal: CurrentPrincipal, capability_id: str) -> Row:
    tenant_id = principal.tenant_id
    found = await in_pool(
        state,
        lambda conn: lifecycle.versions(conn, tenant_id=tenant_id, capability_id=capability_id),
    )
    if found:
        return {"versions": [item_json(r) for r in found]}
    raise manual.not_found(capability_id)


@router.delete(
    "/v1/capabilities/{capability_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a capability (its aliases and cached results go with it)",
)
async def delete_capability(
    state: State, principal: CurrentPrincipal, capability_id: str
) -> Response:
    tenant_id = principal.tenant_id
    gone = await in_pool(
        state, lambda conn: lifecycle.delete(conn, tenant_id=tenant_id, capability_id=capability_id)
    )
    if gone is None:
        raise manual.not_found(capability_id)
    return Response(status_code=204)


async def _in_thread(state: GatewayState, action: Callable[[Conn, Embedder], T]) -> T:
    """``action`` with the embedding model, on a pooled connection off the event loop."""
    embedder = get_embedder(state.settings)
    return await in_pool(state, lambda conn: action(conn, embedder))


async def _write(
    state: GatewayState,
    tenant_id: str,
    kind: bus.EventType,
    action: Callable[[Conn, Embedder], Row],
) -> Row:
    """``_in_thread``, then announce the capability it returns and answer with it."""
    row: Row = await _in_thread(state, action)
    announce(state, tenant_id, kind, row)
    return item_json(row)
