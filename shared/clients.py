"""Per-process clients for worker processes, created lazily (after Celery forks its pool)."""

from __future__ import annotations

from functools import lru_cache

import redis
from psycopg_pool import ConnectionPool
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from shared.config import get_settings
from shared.db import DictConnection, make_pool

# redis-py's default (10 retries, backoff up to 10 s) turns a Redis outage into stalls
# of tens of seconds per call; three quick retries ride out a blip and then fail fast,
# and callers decide what failing means (503, log and carry on, retry later).
FAST_RETRIES = 3


def fast_retry() -> Retry:
    """A retry policy that gives up within ~0.1 s."""
    return Retry(ExponentialBackoff(cap=0.05, base=0.01), FAST_RETRIES)


@lru_cache(maxsize=1)
def db_pool() -> ConnectionPool[DictConnection]:
    """Small pool: a worker process runs one task at a time."""
    return make_pool(get_settings().require_urls()[0], min_size=1, max_size=2)


@lru_cache(maxsize=1)
def redis_client() -> redis.Redis:
    """Sync client for events and metrics."""
    return redis.Redis.from_url(
        get_settings().require_urls()[1],
        socket_timeout=5,
        socket_connect_timeout=1,
        retry=fast_retry(),
    )
