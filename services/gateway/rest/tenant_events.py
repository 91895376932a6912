"""`GET /v1/events`: one server-sent event stream of everything that happens in the caller's tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter
from sse_starlette.sse import EventSourceResponse

from services.gateway.ops.subscription import subscription
from services.gateway.rest.deps import CurrentPrincipal, State
from shared.events import bus
from shared.queues import tenant_events_channel

router = APIRouter(tags=["events"])

# Proxies and browsers drop idle streams after 30-60 s; a comment every 15 s keeps it open.
KEEP_ALIVE_S = 15.0


@router.get(
    "/v1/events",
    summary="Server-sent events of your tenant: executions, capabilities, cache, threshold",
)
async def events(state: State, principal: CurrentPrincipal) -> EventSourceResponse:
    """Live only (no replay). Each frame is `event: <type>` and `data: <json>`:
    `execution.finished` {execution_id, status, duration_ms, cache_hit, capability_id},
    `capability.learned` / `capability.updated` {capability_id, name, version},
    `cache.invalidated` {trigger, scope, count}, `threshold.changed` {old, new};
    a `: keep-alive` comment every 15 s."""
    channel = tenant_events_channel(principal.tenant_id)

    async def stream() -> AsyncIterator[dict[str, Any]]:
        async with subscription(state.aredis, channel) as pubsub:
            while True:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=KEEP_ALIVE_S
                )
                if message is None:
                    yield {"comment": "keep-alive"}
                    continue
                kind, data = bus.decode(message["data"])
                yield {"event": kind, "data": orjson.dumps(data).decode()}

    return EventSourceResponse(stream())
