"""Per-process clients for worker processes, created lazily (after Celery forks its pool)."""

from __future__ import annotations

from functools import lru_cache

import redis
from psycopg_pool import ConnectionPool

from shared.config import get_settings
from shared.db import DictConnection, make_pool


@lru_cache(maxsize=1)
def db_pool() -> ConnectionPool[DictConnection]:
    """Small pool: a worker process runs one task at a time."""
    return make_pool(get_settings().require_urls()[0], min_size=1, max_size=2)


@lru_cache(maxsize=1)
def redis_client() -> redis.Redis:
    """Sync client for events and metrics."""
    return redis.Redis.from_url(get_settings().require_urls()[1], socket_timeout=5)
