"""Clients of ``/mcp`` (and ``agentcards mcp``) hear when their tenant learns a capability.

The skills extension (SEP-2640) defines no notification of its own: a host refetches
``skills/list`` when it wants, and each skill's ``SKILL.md`` is a resource that
``resources/list`` lists, so a new skill is a change of the resource list. The signal is the
base protocol's:

- a 2025-11-25 session that listed resources or skills gets
  ``notifications/resources/list_changed`` (``resources.listChanged`` is declared);
- at 2026-07-28, a ``subscriptions/listen`` stream that asked for ``resourcesListChanged``
  gets the event. Streams are per tenant: another tenant's learning reaches no one else.

A skill's content changes with its capability (a new version, new statistics, an edit:
``capability.updated``, or ``capability.learned`` for a new version): a client subscribed to
one of its files hears ``notifications/resources/updated`` for the URI it subscribed to
(2025-11-25: ``resources/subscribe`` on ``/mcp``; 2026-07-28: a ``subscriptions/listen``
stream naming the URI). A deletion is not announced: the client finds out on its next read.

The source is each tenant's capability-change channel (``shared.events.bus`` publishes a
``capability.learned`` or ``capability.updated`` there as well as on the tenant's event
channel), published by the learning worker (and by the REST capability admin), heard over
Redis by every gateway process. Not the tenant's event channel: that one carries an
``execution.finished`` for every call, which every gateway would read and drop.
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
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from redis.exceptions import RedisError

from services.gateway.mcp.log_messages import connection_of
from services.gateway.ops import skills as ops
from services.gateway.state import GatewayState
from shared.capabilities.skills import SCHEME, file_uri, split_uri
from shared.events.bus import EventType
from shared.queues import CAPABILITY_EVENTS_PREFIX

log = logging.getLogger(__name__)

POLL_S = 2.0  # under the async Redis client's socket timeout

# Per tenant: the 2025-11-25 connections to tell, and the bus of its listen streams.
_sessions: dict[str, weakref.WeakSet[Connection]] = {}
_buses: dict[str, InMemorySubscriptionBus] = {}
_streams: dict[str, ListenHandler] = {}
# Per tenant: the 2025-11-25 connections subscribed to skill:// URIs, and those URIs.
_subscribed: dict[str, weakref.WeakKeyDictionary[Connection, set[str]]] = {}


def remember(tenant_id: str, ctx: ServerRequestContext[Any]) -> None:
    """The connection of a request that listed the tenant's resources or skills hears of a
    new one (a connection that ends drops out by itself)."""
    _sessions.setdefault(tenant_id, weakref.WeakSet()).add(connection_of(ctx.session))


def subscribe(tenant_id: str, ctx: ServerRequestContext[Any], uri: str) -> None:
    """The request's connection hears ``notifications/resources/updated`` for ``uri`` (a file
    of one of the tenant's skills) when the skill's capability changes."""
    connections = _subscribed.setdefault(tenant_id, weakref.WeakKeyDictionary())
    connections.setdefault(connection_of(ctx.session), set()).add(uri)


def unsubscribe(tenant_id: str, ctx: ServerRequestContext[Any], uri: str) -> None:
    uris = _subscribed.get(tenant_id, weakref.WeakKeyDictionary()).get(connection_of(ctx.session))
    if uris is not None:
        uris.discard(uri)


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


async def changed(state: GatewayState, tenant_id: str, capability: str) -> None:
    """The tenant's capability ``capability`` changed: ``notifications/resources/updated`` for
    its skill's files, to the subscribed connections (by the URIs they subscribed to) and the
    listen streams (each hears the URIs it named)."""
    subscribers = list(_subscribed.get(tenant_id, {}).items())
    bus = _buses.get(tenant_id)
    if not subscribers and bus is None:  # nobody to tell: no need to read the skill
        return
    skill = await ops.skill_of_capability(state, tenant_id=tenant_id, capability=capability)
    if skill is None:
        return
    for connection, uris in subscribers:
        for uri in sorted(u for u in uris if split_uri(u)[0] == skill.name):
            try:
                await connection.send_resource_updated(uri)
            except Exception as exc:  # a client gone meanwhile
                log.debug("resources/updated not sent for %s: %s", uri, exc)
    if bus is not None:
        for uri in [f"{SCHEME}{skill.name}", *(file_uri(skill.name, f.path) for f in skill.files)]:
            await bus.publish(ResourceUpdated(uri=uri))


async def relay(get_state: Callable[[], GatewayState]) -> None:
    """Hear every tenant's ``capability.learned`` and ``capability.updated``: ``tell`` a new
    skill, announce a changed one (``changed``), for as long as the caller runs this (Redis
    restarting: listen again after a pause)."""
    failures = 0
    while True:
        pubsub = get_state().aredis.pubsub()
        try:
            await pubsub.psubscribe(CAPABILITY_EVENTS_PREFIX + "*")
            failures = 0
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=POLL_S)
                event = None if message is None else _capability_event(message["data"])
                if message is None or event is None:
                    continue
                channel = message["channel"]
                channel = channel.decode() if isinstance(channel, bytes) else str(channel)
                tenant_id = channel.removeprefix(CAPABILITY_EVENTS_PREFIX)
                kind, capability = event
                if kind == EventType.CAPABILITY_LEARNED:
                    await tell(tenant_id)
                if capability:
                    try:
                        await changed(get_state(), tenant_id, capability)
                    except Exception as exc:  # e.g. Postgres down: this one goes unannounced
                        log.warning("skills: %s's change not announced: %r", capability, exc)
        except Exception as exc:  # never end the caller's task group
            failures += 1
            level = logging.WARNING if isinstance(exc, RedisError) else logging.ERROR
            log.log(level, "skills: capability changes not heard: %r", exc)
            await anyio.sleep(min(5.0, 0.2 * 2**failures))
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()


def _capability_event(data: bytes | str) -> tuple[str, str] | None:
    """(type, capability name) of a ``capability.learned`` or ``capability.updated`` event."""
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    if kind not in (EventType.CAPABILITY_LEARNED, EventType.CAPABILITY_UPDATED):
        return None
    data_ = event.get("data")
    name = data_.get("name") if isinstance(data_, dict) else None
    return str(kind), str(name or "")
