"""``listen.JoinedBus``: a listen stream of /mcp in direct or both mode hears its tenant's skill
changes and, of the servers' bus, only tool list changes; unsubscribing leaves both buses."""

from __future__ import annotations

from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)

from services.gateway.mcp.listen import JoinedBus


async def test_each_source_gives_only_what_it_keeps_until_unsubscribed() -> None:
    skills, servers = InMemorySubscriptionBus(), InMemorySubscriptionBus()
    joined = JoinedBus(
        [(skills, lambda event: True), (servers, lambda e: isinstance(e, ToolsListChanged))]
    )
    heard: list[ServerEvent] = []
    unsubscribe = joined.subscribe(heard.append)
    await skills.publish(ResourcesListChanged())
    await servers.publish(PromptsListChanged())  # not a tool list change: left out
    await servers.publish(ToolsListChanged())
    assert heard == [ResourcesListChanged(), ToolsListChanged()]
    unsubscribe()
    await skills.publish(ResourcesListChanged())
    await servers.publish(ToolsListChanged())
    assert heard == [ResourcesListChanged(), ToolsListChanged()]
