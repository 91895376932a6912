"""kombu's Redis transport, with one redis-py client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for every publish, every delivery's
bookkeeping and every ack (``Channel.conn_or_acquire``). Building one fills the client's
table of reply callbacks (~170 entries): ~0.18 CPU-ms each time, about half of what a task's
publish costs the gateway, and twice per run in a sandbox worker's main process, once before
the run is handed to the pool. A redis-py client holds no connection of its own (its pool
does, and hands one to each command, from any thread), so one client per pool does the same.

Selected by ``broker_transport`` (shared/broker.py); everything else is kombu's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):  # type: ignore[misc]
    _commands_client: redis.Redis | None = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        cached = self._commands_client
        # The channel drops its pool on a connection error: a client of the old one is not reused.
        if cached is None or cached.connection_pool is not self.pool:
            cached = self._commands_client = self._create_client()
        yield cached


class Transport(kombu_redis.Transport):  # type: ignore[misc]
    Channel = Channel
