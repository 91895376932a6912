"""Per-process clients of a sandbox worker, created lazily after Celery forks its pool."""

from __future__ import annotations

import asyncio
from functools import lru_cache

import redis
import redis.asyncio as aioredis
from psycopg_pool import ConnectionPool

from shared.config import get_settings
from shared.db import DictConnection, make_pool


@lru_cache(maxsize=1)
def db_pool() -> ConnectionPool[DictConnection]:
    """Small pool: one task at a time per process, plus event/trace writes."""
    return make_pool(get_settings().require_urls()[0], min_size=1, max_size=2)


@lru_cache(maxsize=1)
def redis_client() -> redis.Redis:
    """Sync client for event publishing."""
    return redis.Redis.from_url(get_settings().require_urls()[1], socket_timeout=5)


_async_redis: aioredis.Redis | None = None


def async_redis_client() -> aioredis.Redis:
    """Async client for cancellation watches; bound to this process's event loop."""
    global _async_redis
    if _async_redis is None:
        _async_redis = aioredis.Redis.from_url(get_settings().require_urls()[1])
    return _async_redis


@lru_cache(maxsize=1)
def event_loop() -> asyncio.AbstractEventLoop:
    """One loop per worker process, reused by every task (keeps async clients warm)."""
    return asyncio.new_event_loop()
