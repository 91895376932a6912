"""Clients of ``/mcp`` (and ``agentcards mcp``) hear when their tenant learns a capability.

The skills extension (SEP-2640) defines no notification of its own: a host refetches
``skills/list`` when it wants, and each skill's ``SKILL.md`` is a resource that
``resources/list`` lists, so a new skill is a change of the resource list. The signal is the
base protocol's:

- a 2025-11-25 session that listed resources or skills gets
  ``notifications/resources/list_changed`` (``resources.listChanged`` is declared);
- at 2026-07-28, a ``subscriptions/listen`` stream that asked for ``resourcesListChanged``
  gets the event. Streams are per tenant: another tenant's learning reaches no one else.

The source is each tenant's event channel (``shared.events.bus``): ``capability.learned``,
published by the learning worker (and by the REST capability admin), heard over Redis by
every gateway process. A capability's new version or statistics (``capability.updated``)
and a deletion are not announced: the list's members stay, or a client finds out on its
next read.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from mcp import types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged
from redis.exceptions import RedisError

from services.gateway.mcp.log_messages import connection_of
from services.gateway.state import GatewayState
from shared.events.bus import EventType
from shared.queues import TENANT_EVENTS_PREFIX

log = logging.getLogger(__name__)

POLL_S = 2.0  # under the async Redis client's socket timeout

# Per tenant: the 2025-11-25 connections to tell, and the bus of its listen streams.
_sessions: dict[str, weakref.WeakSet[Connection]] = {}
_buses: dict[str, InMemorySubscriptionBus] = {}
_streams: dict[str, ListenHandler] = {}


def remember(tenant_id: str, ctx: ServerRequestContext[Any]) -> None:
    """The connection of a request that listed the tenant's resources or skills hears of a
    new one (a connection that ends drops out by itself)."""
    _sessions.setdefault(tenant_id, weakref.WeakSet()).add(connection_of(ctx.session))


def listen_handler(
    tenant_of: Callable[[ServerRequestContext[Any]], Awaitable[str]],
) -> Callable[
    [ServerRequestContext[Any], types.SubscriptionsListenRequestParams],
    Awaitable[types.SubscriptionsListenResult],
]:
    """``subscriptions/listen`` on the caller's tenant's bus (the SDK's handler, per tenant)."""

    async def handle(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        tenant_id = await tenant_of(ctx)
        if tenant_id not in _streams:
            _streams[tenant_id] = ListenHandler(bus_of(tenant_id))
        return await _streams[tenant_id](ctx, params)

    return handle


def bus_of(tenant_id: str) -> InMemorySubscriptionBus:
    """The bus of the tenant's listen streams (its skills' changes)."""
    return _buses.setdefault(tenant_id, InMemorySubscriptionBus())


async def tell(tenant_id: str) -> None:
    """The tenant's resource list changed: tell its sessions and listen streams."""
    for connection in list(_sessions.get(tenant_id, ())):
        try:
            await connection.send_resource_list_changed()
        except Exception as exc:  # a client gone meanwhile
            log.debug("resources/list_changed not sent to a %s client: %s", tenant_id, exc)
    bus = _buses.get(tenant_id)
    if bus is not None:
        await bus.publish(ResourcesListChanged())


async def relay(get_state: Callable[[], GatewayState]) -> None:
    """Hear every tenant's ``capability.learned`` and ``tell`` it, for as long as the caller
    runs this (Redis restarting: listen again after a pause)."""
    failures = 0
    while True:
        pubsub = get_state().aredis.pubsub()
        try:
            await pubsub.psubscribe(TENANT_EVENTS_PREFIX + "*")
            failures = 0
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=POLL_S)
                if message is not None and _learned(message["data"]):
                    channel = message["channel"]
                    channel = channel.decode() if isinstance(channel, bytes) else str(channel)
                    await tell(channel.removeprefix(TENANT_EVENTS_PREFIX))
        except Exception as exc:  # never end the caller's task group
            failures += 1
            level = logging.WARNING if isinstance(exc, RedisError) else logging.ERROR
            log.log(level, "skills: capability changes not heard: %r", exc)
            await anyio.sleep(min(5.0, 0.2 * 2**failures))
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()


def _learned(data: bytes | str) -> bool:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(event, dict) and event.get("type") == EventType.CAPABILITY_LEARNED
