"""One way to run a store call from async code: on a pooled connection, off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from anyio import to_thread

from services.gateway.state import GatewayState
from shared.db import DictConnection

T = TypeVar("T")


async def in_pool(state: GatewayState, fn: Callable[[DictConnection], T]) -> T:
    """``fn(conn)`` on a connection from the pool, in a worker thread: psycopg blocks, and the
    event loop serves every other request meanwhile. The pool commits when ``fn`` returns and
    rolls back when it raises."""

    def run() -> T:
        with state.pool.connection() as conn:
            return fn(conn)

    return await to_thread.run_sync(run)
