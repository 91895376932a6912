"""Two ways to run a store call from async code: on a pooled connection, off the event loop
(``in_pool``), or a hot path's short read on the event loop itself (``on_loop``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from anyio import to_thread
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from services.gateway.state import GatewayState
from shared.db import DictConnection, psycopg_url

T = TypeVar("T")
log = logging.getLogger(__name__)

# ``on_loop``'s connections: its reads are short (one indexed row), so a few serve many
# callers; a caller that finds none free within ON_LOOP_WAIT_S reads in a thread instead.
ON_LOOP_CONNECTIONS = 4
ON_LOOP_WAIT_S = 0.05


async def in_pool(state: GatewayState, fn: Callable[[DictConnection], T]) -> T:
    """``fn(conn)`` on a connection from the pool, in a worker thread: psycopg blocks, and the
    event loop serves every other request meanwhile. The pool commits when ``fn`` returns and
    rolls back when it raises."""

    def run() -> T:
        with state.pool.connection() as conn:
            return fn(conn)

    return await to_thread.run_sync(run)


async def on_loop(
    state: GatewayState, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]
) -> T | None:
    """``fn(conn)`` on the event loop, on an autocommit connection of a small async pool: a
    hot path's read without a thread hop. None when no connection was free at once or
    Postgres failed: the caller then does its work ``in_pool`` (which reports an outage as
    every other request does)."""
    try:
        pool = await _open(state)
        async with pool.connection(timeout=ON_LOOP_WAIT_S) as conn:
            return await fn(conn)
    except (PoolTimeout, psycopg.Error) as exc:
        log.debug("a read on the event loop fell back to a thread: %s", exc)
        return None


async def _open(state: GatewayState) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
    """The state's async pool, made and opened at its first use (no await between the check
    and the assignment: one pool)."""
    if state.apool is None:
        database_url, _ = state.settings.require_urls()
        state.apool = AsyncConnectionPool(
            psycopg_url(database_url),
            min_size=1,
            max_size=ON_LOOP_CONNECTIONS,
            kwargs={"autocommit": True},
            open=False,
        )
        await state.apool.open()
    return state.apool
