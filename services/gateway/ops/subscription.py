"""A Redis pub/sub subscription that always gives its connection back (execution events, the
tenant's event stream, cache invalidations)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub


@asynccontextmanager
async def subscription(client: aioredis.Redis, channel: str) -> AsyncIterator[PubSub]:
    """A pub/sub subscription whose connection goes back to the pool whatever happens.

    The connection is taken by ``subscribe``; anything failing or cancelled after that,
    subscribing included, must still close it, or the pool loses it for good.
    """
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(channel)
        yield pubsub
    finally:
        await pubsub.aclose()
