"""Waiting on results: every waiting request follows its execution through the gateway's
one subscriber (shared/pubsub_hub.py), and leaves nothing subscribed behind.

Every `?wait=true` request subscribes to its execution's events, then reads the event log
with a second connection. When the pool was full, the log read failed; the follower's
exit never ran, so its subscription kept a connection for good. Each such request
leaked one, the pool stayed full, and every later wait answered 503 "too many
connections" while Redis was fine (found by `agentcards bench load` at 80 submissions/s).
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import cast

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import MaxConnectionsError

from services.gateway.ops.execution_events import EventFollower
from services.gateway.state import GatewayState
from shared.executions.cancel import request_cancel, wait_for_cancel
from shared.executions.events import FINISHED, publish_event
from shared.pubsub_hub import PubSubHub
from shared.queues import cancel_key, events_channel

pytestmark = pytest.mark.integration


async def test_a_follower_that_cannot_read_the_log_leaves_nothing_subscribed(
    redis_url: str,
) -> None:
    client = aioredis.Redis.from_url(redis_url, max_connections=1)  # a full pool, in small
    state = cast(GatewayState, SimpleNamespace(aredis=client, event_hub=PubSubHub(client)))
    ids = [str(uuid.uuid4()) for _ in range(3)]
    try:
        for execution_id in ids:
            with pytest.raises(MaxConnectionsError):  # subscribed, then no connection left
                async with EventFollower(state, execution_id=execution_id):
                    pass
        assert state.event_hub.channels() == []
    finally:
        await state.event_hub.aclose()
        await client.aclose()
    sync = redis.Redis.from_url(redis_url)
    assert await _subscribers(sync, *map(events_channel, ids)) == [0, 0, 0]


async def test_waits_share_one_connection_and_each_hears_only_its_own_execution(
    redis_url: str,
) -> None:
    client = aioredis.Redis.from_url(redis_url)
    state = cast(GatewayState, SimpleNamespace(aredis=client, event_hub=PubSubHub(client)))
    sync = redis.Redis.from_url(redis_url)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        async with (
            EventFollower(state, execution_id=a) as follows_a,
            EventFollower(state, execution_id=b) as follows_b,
        ):
            pubsub_clients = sync.client_list(_type="pubsub")
            publish_event(sync, execution_id=b, event={"type": FINISHED, "status": "failed"})
            publish_event(sync, execution_id=a, event={"type": FINISHED, "status": "succeeded"})
            heard_a = await follows_a.next(timeout_s=5)
            heard_b = await follows_b.next(timeout_s=5)
            assert await follows_a.next(timeout_s=0.2) is None  # b's event never reaches a
    finally:
        await state.event_hub.aclose()
        await client.aclose()
    assert len(pubsub_clients) == 1
    assert (heard_a or {}).get("status") == "succeeded"
    assert (heard_b or {}).get("status") == "failed"
    # The hub closed its connection: Redis drops its subscriptions once it reads the close.
    assert await _subscribers(sync, events_channel(a), events_channel(b)) == [0, 0]


async def _subscribers(sync: redis.Redis, *channels: str, within_s: float = 5.0) -> list[int]:
    """Each channel's subscriber count, once they are all 0 or ``within_s`` passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        counts = [int(count) for _, count in sync.pubsub_numsub(*channels)]
        if not any(counts) or loop.time() > deadline:
            return counts
        await asyncio.sleep(0.05)


async def test_a_wait_hears_its_end_across_a_killed_shared_connection(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    state = cast(GatewayState, SimpleNamespace(aredis=client, event_hub=PubSubHub(client)))
    sync = redis.Redis.from_url(redis_url)
    first, later = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        async with EventFollower(state, execution_id=first) as follows:
            assert sync.client_kill_filter(_type="pubsub") == 1
            # Published while no connection may listen: the log has it after the resync.
            publish_event(sync, execution_id=first, event={"type": FINISHED, "status": "failed"})
            heard_first = await follows.next(timeout_s=5)
        async with EventFollower(state, execution_id=later) as follows:
            publish_event(sync, execution_id=later, event={"type": FINISHED, "status": "failed"})
            heard_later = await follows.next(timeout_s=5)
            pubsub_clients = sync.client_list(_type="pubsub")  # the new one, only
    finally:
        await state.event_hub.aclose()
        await client.aclose()
    assert (heard_first or {}).get("type") == FINISHED
    assert (heard_later or {}).get("type") == FINISHED
    assert len(pubsub_clients) == 1


async def test_a_wait_that_follows_another_on_the_same_execution_hears_its_end(
    redis_url: str,
) -> None:
    # One request's wait ends (its UNSUBSCRIBE sent, not yet confirmed) and the next request
    # follows the same execution at once (an SSE stream after a `wait=true` POST, a
    # 2026-07-28 client's retry): the second must be subscribed, not left deaf until the
    # first one's unsubscribe is read.
    client = aioredis.Redis.from_url(redis_url)
    state = cast(GatewayState, SimpleNamespace(aredis=client, event_hub=PubSubHub(client)))
    sync = redis.Redis.from_url(redis_url)
    execution_id = str(uuid.uuid4())
    try:
        async with EventFollower(state, execution_id=execution_id):
            pass
        async with EventFollower(state, execution_id=execution_id) as follows:
            await asyncio.sleep(0.3)  # the reader reads the first one's unsubscribe reply
            publish_event(sync, execution_id=execution_id, event={"type": FINISHED})
            heard = await follows.next(timeout_s=5)
            subscribers = sync.pubsub_numsub(events_channel(execution_id))
    finally:
        await state.event_hub.aclose()
        await client.aclose()
    assert (heard or {}).get("type") == FINISHED
    assert [count for _, count in subscribers] == [1]


async def test_cancel_watches_share_one_pattern_and_each_hears_only_its_own_run(
    redis_url: str,
) -> None:
    # A sandbox pool process's hub (workers/sandbox/clients.py): the cancel channels'
    # pattern, subscribed once; a run's watch then subscribes nothing of its own.
    client = aioredis.Redis.from_url(redis_url)
    hub = PubSubHub(client, pattern=cancel_key("*"))
    sync = redis.Redis.from_url(redis_url)
    a, b, later = (str(uuid.uuid4()) for _ in range(3))
    try:
        watch_a = asyncio.ensure_future(wait_for_cancel(client, hub, execution_id=a))
        watch_b = asyncio.ensure_future(wait_for_cancel(client, hub, execution_id=b))
        await asyncio.sleep(0.3)  # both subscribed
        request_cancel(sync, execution_id=b)
        await asyncio.wait_for(watch_b, 5)
        await asyncio.sleep(0.3)
        a_heard_b = watch_a.done()
        patterns_during = sync.pubsub_numpat()
        channels_during = sync.pubsub_channels(cancel_key("*"))  # none of a run's own
        # The shared connection dies: a cancel sent meanwhile still reaches its watch.
        assert sync.client_kill_filter(_type="pubsub") == 1
        request_cancel(sync, execution_id=a)
        await asyncio.wait_for(watch_a, 5)
        watch_later = asyncio.ensure_future(wait_for_cancel(client, hub, execution_id=later))
        await asyncio.sleep(0.3)
        sync.publish(cancel_key(later), 1)  # the pub/sub nudge alone, no flag key
        await asyncio.wait_for(watch_later, 5)
        pubsub_clients = sync.client_list(_type="pubsub")
        with pytest.raises(ValueError):  # a channel the pattern does not cover
            async with hub.follow(events_channel(a)):
                pass
    finally:
        await hub.aclose()
        await client.aclose()
    assert not a_heard_b
    assert patterns_during == 1
    assert len(pubsub_clients) == 1
    assert channels_during == []


async def test_a_wait_that_ended_leaves_its_channel_unsubscribed_on_the_open_hub(
    redis_url: str,
) -> None:
    # The UNSUBSCRIBE goes out after the waiter left (its answer is not held up by it), but it
    # goes out: Redis keeps no subscription of an ended wait while the gateway serves on.
    client = aioredis.Redis.from_url(redis_url)
    state = cast(GatewayState, SimpleNamespace(aredis=client, event_hub=PubSubHub(client)))
    sync = redis.Redis.from_url(redis_url)
    ended, waiting = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        async with EventFollower(state, execution_id=waiting) as still:
            async with EventFollower(state, execution_id=ended) as follows:
                publish_event(sync, execution_id=ended, event={"type": FINISHED})
                heard = await follows.next(timeout_s=5)
            assert state.event_hub.channels() == [events_channel(waiting)]
            for _ in range(100):  # the hub's reader reads the UNSUBSCRIBE's reply
                if sync.pubsub_numsub(events_channel(ended))[0][1] == 0:
                    break
                await asyncio.sleep(0.05)
            numsub = sync.pubsub_numsub(events_channel(ended), events_channel(waiting))
            publish_event(sync, execution_id=waiting, event={"type": FINISHED})
            heard_still = await still.next(timeout_s=5)
    finally:
        await state.event_hub.aclose()
        await client.aclose()
    assert (heard or {}).get("type") == FINISHED
    assert [count for _, count in numsub] == [0, 1]
    assert (heard_still or {}).get("type") == FINISHED
