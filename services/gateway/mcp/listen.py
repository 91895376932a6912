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

from collections.abc import Awaitable, Callable, Sequence
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
    SubscriptionBus,
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


def bus(endpoint: str | None) -> InMemorySubscriptionBus:
    """The bus ``endpoint``'s listen streams hear (None: the aggregate's, every server's)."""
    return _buses.setdefault(endpoint, InMemorySubscriptionBus())


class JoinedBus:
    """A ``SubscriptionBus`` whose listeners hear several buses, each narrowed to the events
    its ``keep`` accepts (``/mcp`` in direct or both mode: its tenant's skill changes and the
    servers' tool list changes). Publishing goes to every bus."""

    def __init__(self, sources: Sequence[tuple[SubscriptionBus, Callable[[ServerEvent], bool]]]):
        self._sources = list(sources)

    async def publish(self, event: ServerEvent) -> None:
        for source, _ in self._sources:
            await source.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        def narrowed(keep: Callable[[ServerEvent], bool]) -> Callable[[ServerEvent], None]:
            return lambda event: listener(event) if keep(event) else None

        undo = [source.subscribe(narrowed(keep)) for source, keep in self._sources]

        def unsubscribe() -> None:
            for each in undo:
                each()

        return unsubscribe


def listen_handler(endpoint: str | None, subscribe: Subscribe) -> Handler:
    """The ``subscriptions/listen`` handler of ``endpoint``: ``subscribe(ctx, uri)`` subscribes
    (and authorizes) each resource the listen names before the SDK's handler streams events."""
    streams = ListenHandler(bus(endpoint))

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
