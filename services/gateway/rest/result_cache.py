"""REST for the result cache: stats (the tenant's, one capability's), manual invalidation, and
a live stream of invalidations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Query
from sse_starlette.sse import EventSourceResponse

from services.gateway.ops.cache_admin import (
    cache_stats,
    capability_cache_facts,
    clear_cache,
    clear_capability_cache,
)
from services.gateway.ops.models.cache import CapabilityCacheFacts
from services.gateway.ops.subscription import subscription
from services.gateway.rest.deps import CurrentPrincipal, State
from shared.queues import CACHE_INVALIDATIONS_CHANNEL

router = APIRouter(tags=["cache"])


@router.get("/v1/cache/stats", summary="Entries, hits, misses and hit rate per level")
async def stats(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    """The caller's tenant: per level (execution, capability, intent) and invalidations by trigger."""
    return await cache_stats(state, tenant_id=principal.tenant_id)


@router.delete(
    "/v1/cache", summary="Drop the tenant's cached results (or those that used a server)"
)
async def clear(
    state: State,
    principal: CurrentPrincipal,
    server: str | None = Query(
        None, max_length=64, description="only entries that used a tool of this server"
    ),
) -> dict[str, Any]:
    """Every entry of the caller's tenant, both levels; logged as a manual invalidation."""
    return await clear_cache(state, principal=principal, server=server)


@router.get(
    "/v1/capabilities/{capability_ref}/cache",
    response_model=CapabilityCacheFacts,
    summary="One capability's cache facts: hit rate of its runs, TTL, live entries",
)
async def capability_facts(
    state: State, principal: CurrentPrincipal, capability_ref: str
) -> dict[str, Any]:
    """By id or name; 404 for an unknown capability."""
    return await capability_cache_facts(state, tenant_id=principal.tenant_id, ref=capability_ref)


@router.delete(
    "/v1/capabilities/{capability_ref}/cache", summary="Drop one capability's cached results"
)
async def clear_capability(
    state: State, principal: CurrentPrincipal, capability_ref: str
) -> dict[str, Any]:
    """By id or name; 404 for an unknown capability."""
    return await clear_capability_cache(state, principal=principal, ref=capability_ref)


@router.get("/v1/cache/events", summary="Server-sent events: one per invalidation of your entries")
async def events(state: State, principal: CurrentPrincipal) -> EventSourceResponse:
    """Live only (no replay): `cache.invalidated` with trigger, scope and your tenant's count."""
    tenant = principal.tenant_id

    async def stream() -> AsyncIterator[dict[str, Any]]:
        async with subscription(state.aredis, CACHE_INVALIDATIONS_CHANNEL) as pubsub:
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=15)
                if message is None:
                    yield {"comment": "keep-alive"}
                    continue
                event = orjson.loads(message["data"])
                mine = (event.get("tenants") or {}).get(tenant)
                if mine is None:
                    continue
                event = {**event, "count": mine, "tenants": None}
                yield {"event": event["type"], "data": orjson.dumps(event).decode()}

    return EventSourceResponse(stream())
