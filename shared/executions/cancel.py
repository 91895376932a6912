"""Cancellation requests: a flag key (for a worker that looks later) plus a pub/sub nudge."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis

from shared.queues import cancel_key

# A request outlives any execution's wall time (at most an hour, see Settings).
CANCEL_TTL_S = 3600


def request_cancel(client: redis.Redis, *, execution_id: str) -> None:
    """Ask whichever worker runs the execution to stop it."""
    key = cancel_key(execution_id)
    pipe = client.pipeline(transaction=False)
    pipe.set(key, 1, ex=CANCEL_TTL_S)
    pipe.publish(key, 1)
    pipe.execute()


async def wait_for_cancel(client: aioredis.Redis, *, execution_id: str) -> None:
    """Return once cancellation was requested (subscribe first, then check the flag: no race)."""
    key = cancel_key(execution_id)
    pubsub = client.pubsub()
    await pubsub.subscribe(key)
    try:
        if await client.exists(key):
            return
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5.0)
            if message is not None or await client.exists(key):
                return
    finally:
        await pubsub.aclose()
