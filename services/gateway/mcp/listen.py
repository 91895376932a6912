"""``subscriptions/listen`` (MCP 2026-07-28, SEP-2575) on the direct endpoints.

At 2026-07-28 there is no session to notify: a client opens a ``subscriptions/listen``
request and its response stream carries the change events it asked for. One SDK
``ListenHandler`` per endpoint serves the stream from that endpoint's in-process bus; the
direct surface publishes on it what it tells 2025-11-25 sessions (a server's tool, prompt and
resource list changes, heard from the toolhost over Redis, and a downstream resource's
updates). A listen that names resources first subscribes to them downstream, as
``resources/subscribe`` does (same allow-list check): a URI the key may not read refuses the
whole listen before the acknowledgement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

# The change a list notice names ("tools", "prompts", "resources") as a listen event.
LIST_CHANGED: dict[str, ServerEvent] = {
    "tools": ToolsListChanged(),
    "prompts": PromptsListChanged(),
    "resources": ResourcesListChanged(),
}

Subscribe = Callable[[ServerRequestContext[Any], str], Awaitable[object]]
Handler = Callable[
    [ServerRequestContext[Any], types.SubscriptionsListenRequestParams],
    Awaitable[types.SubscriptionsListenResult],
]

# Each endpoint's bus, by its server's name (None: the aggregate /mcp/servers).
_buses: dict[str | None, InMemorySubscriptionBus] = {}


def listen_handler(endpoint: str | None, subscribe: Subscribe) -> Handler:
    """The ``subscriptions/listen`` handler of ``endpoint``: ``subscribe(ctx, uri)`` subscribes
    (and authorizes) each resource the listen names before the SDK's handler streams events."""
    streams = ListenHandler(_buses.setdefault(endpoint, InMemorySubscriptionBus()))

    async def handle(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        for uri in params.notifications.resource_subscriptions or ():
            await subscribe(ctx, uri)
        return await streams(ctx, params)

    return handle


async def publish(endpoint: str | None, event: ServerEvent) -> None:
    """Give ``event`` to the streams listening on ``endpoint`` (each keeps what it asked for)."""
    bus = _buses.get(endpoint)
    if bus is not None:
        await bus.publish(event)


async def publish_updated(endpoint: str | None, uri: str) -> None:
    """The resource ``uri`` (as ``endpoint`` names it) changed."""
    await publish(endpoint, ResourceUpdated(uri=uri))
