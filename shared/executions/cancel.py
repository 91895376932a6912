"""Cancellation requests: a flag key (for a worker that looks later) plus a pub/sub nudge."""

from __future__ import annotations

import asyncio
import logging

import redis
import redis.asyncio as aioredis

from shared.pubsub_hub import RESYNC, PubSubHub
from shared.queues import cancel_key

log = logging.getLogger(__name__)

# A request outlives any execution's wall time (at most an hour, see Settings).
CANCEL_TTL_S = 3600
# While Redis is unreachable the watch retries this often (capped); a cancel request sent
# meanwhile is still seen: the flag key is checked again after every reconnect.
_RETRY_MAX_S = 2.0


def request_cancel(client: redis.Redis, *, execution_id: str) -> None:
    """Ask whichever worker runs the execution to stop it."""
    key = cancel_key(execution_id)
    pipe = client.pipeline(transaction=False)
    pipe.set(key, 1, ex=CANCEL_TTL_S)
    pipe.publish(key, 1)
    pipe.execute()


async def wait_for_cancel(client: aioredis.Redis, hub: PubSubHub, *, execution_id: str) -> None:
    """Return only once cancellation was requested; a lost Redis connection is never a request.

    Redis errors (broker down, restarting) are retried with backoff until the caller
    cancels this coroutine, so an outage leaves the execution running rather than
    killing it as if someone had asked. The request's channel is followed on ``hub``, the
    process's one pub/sub connection (a connection per run cost a connect, the client's
    set-up and a close in the pool process and in Redis).
    """
    failures = 0
    while True:
        try:
            await _watch_once(client, hub, execution_id=execution_id)
            return
        except (redis.RedisError, OSError) as exc:
            failures += 1
            delay = min(_RETRY_MAX_S, 0.1 * 2**failures)
            if failures == 1:
                log.warning("cancel watch of %s lost Redis (%s); retrying", execution_id, exc)
            await asyncio.sleep(delay)


async def _watch_once(client: aioredis.Redis, hub: PubSubHub, *, execution_id: str) -> None:
    """Subscribe first, then check the flag (no race); returns when a request is seen.
    After the hub's connection was replaced (``RESYNC``) the flag is checked again."""
    key = cancel_key(execution_id)
    async with hub.follow(key) as follower:
        if await client.exists(key):
            return
        while True:
            message = await follower.get(timeout_s=5.0)
            if (message is not None and message is not RESYNC) or await client.exists(key):
                return
