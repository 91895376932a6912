"""One Redis pub/sub connection per process for every channel it follows.

The gateway's waiting requests (``?wait=true``, an SSE stream, an MCP call) follow their
executions' event channels through one hub, a sandbox pool process its runs' cancel
channels (``shared/executions/cancel.py``) through another. A follower of a channel goes
through the hub: the first follower of a channel subscribes it on the hub's one
connection, one reader task hands each message to that channel's followers, and the last
one to leave unsubscribes it. Before, each follower opened a connection of its own
(connect, client set-up, subscribe, close): ~1 ms of the gateway's CPU per wait, and Redis'
besides, on a path where every millisecond of CPU is shared with the workers.

A connection that fails is replaced at once, every followed channel subscribed again on
the new one, and each follower gets ``RESYNC`` (it re-reads its execution's event log for
what it may have missed in between); when the new connection fails too (Redis is down),
every follower's ``get`` raises the error, as its own connection's read would have, and the
next follower tries a new connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from fnmatch import fnmatchcase
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# How long the reader waits for a message before it looks again (nothing else happens then).
READ_TIMEOUT_S = 1.0


# Put on every follower's queue after the hub's connection was replaced: events may have
# been published while no connection listened.
RESYNC = object()


class HubFailed:
    """Put on a follower's queue when the hub's connection failed: ``get`` raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Follower:
    """One follower's messages (their data), in order."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()

    def put(self, item: Any) -> None:
        self._queue.put_nowait(item)

    async def get(self, *, timeout_s: float) -> Any:
        """The next message's data (or ``RESYNC``), None after ``timeout_s``; raises the hub's
        failure."""
        try:
            async with asyncio.timeout(timeout_s):
                item = await self._queue.get()
        except TimeoutError:
            return None
        if isinstance(item, HubFailed):
            raise item.error
        return item


class PubSubHub:
    """The gateway's shared subscriber (see the module's docstring); bound to the event loop
    that first uses it (a new loop, as in tests, starts it afresh).

    With ``pattern`` (e.g. ``agentcards:cancel:*``) the connection subscribes that pattern
    once and keeps it: following a matching channel then sends Redis nothing, and the
    connection hears every matching channel's messages (those nobody here follows are
    dropped). For channels that publish rarely, as cancel requests do, that saves a
    SUBSCRIBE and an UNSUBSCRIBE per follower.
    """

    def __init__(self, client: aioredis.Redis, *, pattern: str | None = None) -> None:
        self._client = client
        self._pattern = pattern
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._followers: dict[str, set[Follower]] = {}
        self._leaving: set[asyncio.Task[None]] = set()  # UNSUBSCRIBEs under way (``_drop``)

    @asynccontextmanager
    async def follow(self, channel: str) -> AsyncIterator[Follower]:
        """Subscribed to ``channel`` until the block ends (subscribed when it starts)."""
        if self._pattern is not None and not fnmatchcase(channel, self._pattern):
            raise ValueError(f"{channel!r} is not a channel of this hub's {self._pattern!r}")
        follower = Follower()
        await self._add(channel, follower)
        try:
            yield follower
        finally:
            self._drop(channel, follower)

    def channels(self) -> list[str]:
        """The channels someone follows now."""
        return list(self._followers)

    async def aclose(self) -> None:
        """Stop the reader and close the connection (the gateway's shutdown)."""
        for task in list(self._leaving):
            task.cancel()
        if self._reader is not None:
            self._reader.cancel()
        pubsub, self._pubsub, self._reader = self._pubsub, None, None
        if pubsub is not None:
            await pubsub.aclose()

    async def _add(self, channel: str, follower: Follower) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # what the old loop held died with it
            self._loop, self._lock, self._pubsub, self._reader = loop, asyncio.Lock(), None, None
            self._followers = {}
        async with self._lock:
            for attempt in range(2):
                self._followers.setdefault(channel, set()).add(follower)
                if self._pubsub is None:
                    self._pubsub = self._client.pubsub()
                pubsub = self._pubsub
                try:
                    if self._pattern is not None:
                        if not _subscribed(pubsub, self._pattern, pattern=True):
                            await pubsub.psubscribe(self._pattern)
                    elif not _subscribed(pubsub, channel):
                        await pubsub.subscribe(channel)
                    break
                except (RedisError, OSError) as exc:
                    if attempt:  # a fresh connection failed too: Redis is down
                        await self._leave_failed(channel, follower)
                        raise
                    # The connection died under the reader: replaced (every channel
                    # subscribed again), or, failing that, this one tries a new one.
                    await self._replace(pubsub, exc)
                except BaseException:
                    await self._leave_failed(channel, follower)
                    raise
            if self._reader is None or self._reader.done():
                self._reader = loop.create_task(self._read(pubsub))

    def _forget(self, channel: str, follower: Follower) -> bool:
        """Take ``follower`` off ``channel``; True when it was the channel's last (the channel
        is forgotten too)."""
        followers = self._followers.get(channel)
        if followers is None:
            return False
        followers.discard(follower)
        if followers:
            return False
        del self._followers[channel]
        return True

    def _drop(self, channel: str, follower: Follower) -> None:
        """``follower`` hears nothing more, at once; the channel's UNSUBSCRIBE, when it was the
        last follower, goes out from a task of its own: a waiting request answers its client
        first (the UNSUBSCRIBE was a socket write and Redis' wake-up on that path), and a
        cancelled follower leaves without awaiting anything."""
        if not self._forget(channel, follower):
            return
        if self._pattern is not None:  # a pattern stays subscribed
            return
        task = asyncio.get_running_loop().create_task(self._unsubscribe(channel))
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)

    async def _unsubscribe(self, channel: str) -> None:
        """UNSUBSCRIBE ``channel`` unless someone followed it again meanwhile (still subscribed:
        ``_add`` found it so and sent nothing)."""
        async with self._lock:
            pubsub = self._pubsub
            if channel in self._followers or pubsub is None:
                return
            try:
                await pubsub.unsubscribe(channel)
            except (RedisError, OSError) as exc:  # the reader sees it too and ends the others
                log.debug("could not unsubscribe %s: %s", channel, exc)

    async def _leave_failed(self, channel: str, follower: Follower) -> None:
        """Drop ``follower`` whose subscribe failed (the lock held); the connection goes with
        the last channel: nothing to keep it for."""
        if not self._forget(channel, follower):
            return
        pubsub = self._pubsub
        if pubsub is None or self._followers:
            return
        self._pubsub = None
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        await pubsub.aclose()

    async def _read(self, pubsub: PubSub) -> None:
        """Hand every message to its channel's followers until the connection fails."""
        try:
            while True:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=READ_TIMEOUT_S
                )
                if message is None:
                    continue
                channel = message["channel"]
                name = channel.decode() if isinstance(channel, bytes) else str(channel)
                for follower in self._followers.get(name, ()):
                    follower.put(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            async with self._lock:
                await self._replace(pubsub, exc)

    async def _replace(self, pubsub: PubSub, exc: BaseException) -> None:
        """``pubsub`` failed (the lock held): a new connection with every channel subscribed
        again and its followers told to resync; failing that, every follower gets the error."""
        if self._pubsub is not pubsub:  # replaced already
            return
        log.warning("pub/sub hub connection failed: %s", exc)
        self._pubsub = None
        reader, self._reader = self._reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        await pubsub.aclose()
        if not self._followers:
            return
        fresh = self._client.pubsub()
        try:
            if self._pattern is not None:
                await fresh.psubscribe(self._pattern)
            else:
                await fresh.subscribe(*self._followers)
        except (RedisError, OSError) as again:
            await fresh.aclose()
            failed = HubFailed(again)
            for followers in self._followers.values():
                for follower in followers:
                    follower.put(failed)
            self._followers = {}
            return
        self._pubsub = fresh
        self._reader = asyncio.get_running_loop().create_task(self._read(fresh))
        for followers in self._followers.values():
            for follower in followers:
                follower.put(RESYNC)


def _subscribed(pubsub: PubSub, channel: str, *, pattern: bool = False) -> bool:
    """Whether ``channel`` (a ``pattern``) is subscribed on ``pubsub`` and stays so. redis-py
    keeps a channel in ``channels`` from its UNSUBSCRIBE until the reader reads the reply: a
    follower arriving then (the next request on the same execution) must subscribe again, or
    the reply drops the channel and that follower hears nothing live."""
    name = channel.encode()
    if pattern:
        return name in pubsub.patterns and name not in pubsub.pending_unsubscribe_patterns
    return name in pubsub.channels and name not in pubsub.pending_unsubscribe_channels
