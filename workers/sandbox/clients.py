"""Per-process clients of a sandbox worker, created lazily after Celery forks its pool."""

from __future__ import annotations

import asyncio
from functools import lru_cache

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff

from shared.clients import FAST_RETRIES, db_pool, fast_retry, redis_client
from shared.config import get_settings
from shared.executions.liveness import Heartbeat
from shared.pubsub_hub import PubSubHub
from shared.queues import cancel_key

__all__ = [
    "async_redis_client",
    "cancel_hub",
    "db_pool",
    "event_loop",
    "heartbeat",
    "redis_client",
]


_async_redis: aioredis.Redis | None = None


def async_redis_client() -> aioredis.Redis:
    """Async client for cancellation watches; bound to this process's event loop."""
    global _async_redis
    if _async_redis is None:
        _async_redis = aioredis.Redis.from_url(
            get_settings().require_urls()[1],
            socket_connect_timeout=1,
            retry=AsyncRetry(ExponentialBackoff(cap=0.05, base=0.01), FAST_RETRIES),
        )
    return _async_redis


@lru_cache(maxsize=1)
def cancel_hub() -> PubSubHub:
    """This process's one pub/sub connection for its runs' cancel watches: every cancel
    channel, subscribed once (cancels are rare; a run then subscribes nothing)."""
    return PubSubHub(async_redis_client(), pattern=cancel_key("*"))


@lru_cache(maxsize=1)
def event_loop() -> asyncio.AbstractEventLoop:
    """One loop per worker process, reused by every task (keeps async clients warm)."""
    return asyncio.new_event_loop()


@lru_cache(maxsize=1)
def heartbeat() -> Heartbeat:
    """This pool process's heartbeat thread (own client: a beat never waits behind a task)."""
    url = get_settings().require_urls()[1]
    client = redis.Redis.from_url(
        url, socket_timeout=1, socket_connect_timeout=1, retry=fast_retry()
    )
    return Heartbeat(client).start()
