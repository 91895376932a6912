"""Database writes of a sandbox worker, retried with backoff while Postgres is down or restarting."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from workers.sandbox import clients

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long a worker keeps retrying one database step before giving up: long enough for
# the supervisor to restart an embedded Postgres (seconds), short of the task limits.
RETRY_FOR_S = 180.0
_MAX_DELAY_S = 5.0


class DatabaseDown(Exception):
    """Raised when Postgres stayed unreachable for ``RETRY_FOR_S``."""


def with_db_retry(step: Callable[[Any], T], *, what: str) -> T:
    """Run ``step(conn)`` on a pooled connection; connection-level errors are retried.

    Only ``OperationalError`` (server gone, admin shutdown, pool timeout) is retried: the
    transaction did not commit, so running the step again is the same as running it once.
    """
    deadline = time.monotonic() + RETRY_FOR_S
    attempt = 0
    while True:
        try:
            with clients.db_pool().connection() as conn:
                return step(conn)
        except psycopg.OperationalError as exc:
            attempt += 1
            if time.monotonic() >= deadline:
                raise DatabaseDown(f"{what}: {exc}") from exc
            delay = min(_MAX_DELAY_S, 0.2 * 2**attempt)
            log.warning("database unavailable during %s (%s); retry in %.1fs", what, exc, delay)
            time.sleep(delay)
