"""Capability management as the gateway serves it (REST): create, show, edit, versions, delete,
export, import, and the tenant's list with filters.

Everything is the caller's tenant's only: another tenant's id is a NotFound, never a leak.
What changes is announced on the tenant's event stream (``GET /v1/events``) after commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.capabilities import bundle, lifecycle, manual
from shared.capabilities.learners import learners_of
from shared.capabilities.listing import CapabilityFilter, Sort, list_items
from shared.db import DictConnection
from shared.embeddings import Embedder, get_embedder
from shared.errors import NotFound, ValidationFailed
from shared.events import bus

Row = dict[str, Any]
T = TypeVar("T")


def item_json(row: Row) -> Row:
    """An item with its timestamps as ISO 8601 text."""
    return {
        **row,
        "last_used": row["last_used"].isoformat() if row["last_used"] else None,
        "created_at": row["created_at"].isoformat(),
    }


def announce(state: GatewayState, tenant_id: str, kind: bus.EventType, row: Row) -> None:
    """Tell the tenant's event stream a capability was learned or changed."""
    bus.publish(state.redis, tenant_id=tenant_id, type=kind, data=bus.capability_event(row))


async def list_capabilities(
    state: GatewayState, *, tenant_id: str, filters: CapabilityFilter, sort: Sort, limit: int,
    offset: int,
) -> Row:  # fmt: skip
    """One page of the tenant's capabilities and how many match in all."""
    rows, total = await in_pool(
        state,
        lambda conn: list_items(
            conn, tenant_id=tenant_id, filters=filters, sort=sort, limit=limit, offset=offset
        ),
    )
    return {"capabilities": [item_json(r) for r in rows], "total": total}


async def create_capability(
    state: GatewayState, *, tenant_id: str, spec: manual.ManualCapability
) -> Row:
    """A capability added by hand (Conflict when the tenant already has this code)."""
    return await _write(
        state,
        tenant_id,
        bus.EventType.CAPABILITY_LEARNED,
        lambda conn, embedder: manual.create_manual(
            conn, tenant_id=tenant_id, spec=spec, embedder=embedder
        )[0],
    )


async def export_capabilities(state: GatewayState, *, tenant_id: str, ids: list[str] | None) -> Row:
    """A bundle of the given capabilities (or all); NotFound naming ids the tenant lacks."""
    exported = await in_pool(
        state, lambda conn: bundle.export_bundle(conn, tenant_id=tenant_id, ids=ids)
    )
    if ids is not None:
        missing = sorted(set(ids) - {c["id"] for c in exported["capabilities"]})
        if missing:
            raise NotFound(
                f"no capabilities with ids {', '.join(missing)}: list yours with "
                "GET /api/capabilities",
                ids=missing,
            )
    return exported


async def import_capabilities(state: GatewayState, *, tenant_id: str, body: bundle.Bundle) -> Row:
    """Add a bundle's capabilities (code the tenant has is merged), each one announced."""
    done: list[Row] = await _with_embedder(
        state,
        lambda conn, embedder: bundle.import_bundle(
            conn, tenant_id=tenant_id, bundle=body, embedder=embedder
        ),
    )
    bus.publish_many(
        state.redis,
        events=[
            (
                tenant_id,
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


async def get_capability(state: GatewayState, *, tenant_id: str, ref: str) -> Row:
    """One capability by id, or the latest version of a name, with the people who taught it."""

    def read(conn: DictConnection) -> Row:
        found = manual.get_or_404(conn, tenant_id=tenant_id, ref=ref)
        return {**found, "learned_from": learners_of(conn, capability_id=str(found["id"]))}

    return item_json(await in_pool(state, read))


async def edit_capability(
    state: GatewayState, *, tenant_id: str, capability_id: str, changes: Row
) -> Row:
    """Apply the given fields (ValidationFailed for none, or a null name), announced."""
    if not changes:
        raise ValidationFailed(
            "nothing to change: give any of name, description, intent, aliases, disabled",
            field="body",
        )
    for field in ("name", "disabled"):
        if field in changes and changes[field] is None:
            raise ValidationFailed(f"{field}: must not be null", field=field)
    return await _write(
        state,
        tenant_id,
        bus.EventType.CAPABILITY_UPDATED,
        lambda conn, embedder: manual.edit(
            conn,
            tenant_id=tenant_id,
            capability_id=capability_id,
            changes=changes,
            embedder=embedder,
        ),
    )


async def capability_versions(state: GatewayState, *, tenant_id: str, capability_id: str) -> Row:
    """Every version of the capability's name, oldest first; NotFound for an unknown one."""
    found = await in_pool(
        state,
        lambda conn: lifecycle.versions(conn, tenant_id=tenant_id, capability_id=capability_id),
    )
    if found:
        return {"versions": [item_json(r) for r in found]}
    raise manual.not_found(capability_id)


async def delete_capability(state: GatewayState, *, tenant_id: str, capability_id: str) -> None:
    """Delete it with its aliases and cached results; NotFound for an unknown one."""
    gone = await in_pool(
        state, lambda conn: lifecycle.delete(conn, tenant_id=tenant_id, capability_id=capability_id)
    )
    if gone is None:
        raise manual.not_found(capability_id)


async def _with_embedder(state: GatewayState, action: Callable[[DictConnection, Embedder], T]) -> T:
    """``action`` with the embedding model, on a pooled connection off the event loop."""
    embedder = get_embedder(state.settings)
    return await in_pool(state, lambda conn: action(conn, embedder))


async def _write(
    state: GatewayState,
    tenant_id: str,
    kind: bus.EventType,
    action: Callable[[DictConnection, Embedder], Row],
) -> Row:
    """``_with_embedder``, then announce the capability it returns and answer with it."""
    row: Row = await _with_embedder(state, action)
    announce(state, tenant_id, kind, row)
    return item_json(row)
