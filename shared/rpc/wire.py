"""Pipelined Redis round trips on plain connections, for the RPC channel's hot path.

A tool call costs the toolhost two round trips (claim + grant read; reply) and the caller
one (push + wait). redis-py's ``Pipeline`` and its pool's checkout and release (a lock,
events, observability counters on every call) cost more CPU than those round trips take
on the wire (``agentcards bench rpc``). ``Lines`` keeps its idle connections in a list
and sends a batch of commands in one write, then reads their replies in order.

No retries (at-most-once): a connection that fails, or is abandoned mid-batch (the caller
was cancelled), is closed and the error raised; the next batch dials a new one.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import DataError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

Command = tuple[str | bytes | int | float, ...]
# Bytes above which ``pack`` does not copy a value into its header's buffer.
BIG_VALUE = 4096


class NoFreeLine(RedisError):
    """Every connection stayed busy for the wait allowed: the batch was not sent."""


class Lines:
    """Connections to one Redis, each carrying one batch at a time; as many as batches in flight."""

    def __init__(
        self, redis_url: str, *, timeout_s: float | None, max_connections: int | None = None
    ) -> None:
        # Only a factory of connections configured from the URL: never checked out from.
        # No socket timeout: one timer bounds a whole batch (``timeout_s``), not each reply.
        self._factory = aioredis.ConnectionPool.from_url(
            redis_url, socket_timeout=None, retry=Retry(NoBackoff(), 0)
        )
        self._timeout_s = timeout_s
        self._idle: list[AbstractConnection] = []
        # At most this many batches at once (each holds its connection); others wait.
        self._slots = asyncio.Semaphore(max_connections) if max_connections else None

    async def send(
        self,
        *commands: Command,
        then: Sequence[Command] = (),
        wait_s: float | None = None,
        on_write: Callable[[], None] | None = None,
    ) -> list[Any]:
        """Send ``commands`` in one write and return their replies in order (one round trip).

        ``then``: commands written after them, in the same write, their replies appended
        (one that cannot be packed: none of them is sent, each reply is its ``DataError``).
        A command Redis refuses comes back as its ``ResponseError`` in the list (the others'
        replies still count); a connection error, or no answer within the timeout
        (``redis.exceptions.TimeoutError``), is raised. ``wait_s``: how long to wait for a
        free connection when ``max_connections`` are busy (``NoFreeLine``: nothing was sent).
        ``on_write``: called just before the batch is written (not called: nothing was sent)."""
        if self._slots is None:
            return await self._send(commands, then, on_write)
        try:
            async with asyncio.timeout(wait_s):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise NoFreeLine(f"no free connection within {wait_s:.3g}s") from exc
        try:
            return await self._send(commands, then, on_write)
        finally:
            self._slots.release()

    async def send_queued(self, pipe: Any) -> list[Any]:
        """The commands queued on a redis-py pipeline (never executed: it only gathered them,
        the helpers that queue on a pipeline stay as they are), sent as one batch: replies as
        ``execute(raise_on_error=False)`` gives them, without redis-py's reply callbacks (a
        string is bytes, a SET is ``b"OK"``). Half the CPU of ``execute`` on the event loop
        (its pool checkout, retry wrapper and callbacks): for the hot path's batches. No
        scripts (``register_script``): their load-on-miss is ``execute``'s."""
        if getattr(pipe, "scripts", None):
            raise ValueError("a pipeline holding scripts is sent by its own execute()")
        return await self.send(*(args for args, _ in pipe.command_stack))

    async def _send(
        self,
        commands: Sequence[Command],
        then: Sequence[Command],
        on_write: Callable[[], None] | None = None,
    ) -> list[Any]:
        packed = pack(commands)  # DataError before anything is written
        unsent: list[Any] = []
        if then:
            try:
                packed += pack(then)
            except DataError as exc:  # never costs the commands before them
                unsent, then = [exc] * len(then), ()
        conn = self._idle.pop() if self._idle else self._factory.make_connection()
        try:
            async with asyncio.timeout(self._timeout_s):
                await _ready(conn)
                if on_write is not None:
                    on_write()
                await conn.send_packed_command(packed, check_health=False)
                replies: list[Any] = []
                for _ in range(len(commands) + len(then)):
                    try:
                        replies.append(await conn.read_response())
                    except ResponseError as exc:  # read in full: the connection stays in step
                        replies.append(exc)
        except TimeoutError as exc:
            await conn.disconnect()
            raise RedisTimeoutError(f"no answer from Redis within {self._timeout_s}s") from exc
        except BaseException:
            await conn.disconnect()  # unread replies, or a dead socket: never reused
            raise
        self._idle.append(conn)
        return replies + unsent

    async def aclose(self) -> None:
        """Close the idle connections (a batch in flight closes its own when it fails)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect()
        await self._factory.aclose()


def pack(*batches: Sequence[Command]) -> bytes:
    """The commands of ``batches`` in the Redis protocol, in one buffer (one write): what
    redis-py's ``pack_commands`` sends, at a third of its CPU (no chunking of big values, the
    same encoding: str as UTF-8, int and float by ``repr``, bool and other types refused)."""
    out: list[bytes] = []
    for batch in batches:
        for command in batch:
            name = command[0]
            if isinstance(name, str) and " " in name:  # "CLIENT SETINFO": words apart
                command = (*name.split(), *command[1:])
            out.append(b"*%d\r\n" % len(command))
            for arg in command:
                if isinstance(arg, str):
                    data = arg.encode()
                elif isinstance(arg, bytes):
                    data = arg
                elif isinstance(arg, bytearray | memoryview):
                    data = bytes(arg)
                elif isinstance(arg, int | float) and not isinstance(arg, bool):
                    data = repr(arg).encode()
                else:
                    raise DataError(
                        f"Invalid input of type: '{type(arg).__name__}'. "
                        "Convert to a bytes, string, int or float first."
                    )
                if len(data) > BIG_VALUE:  # copied once, by the join
                    out += (b"$%d\r\n" % len(data), data, b"\r\n")
                else:
                    out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def raise_refused(*replies: object) -> None:
    """Raise the first command Redis refused among ``replies`` (``send`` returns refusals in
    place): for a caller to whom one is an outage, say a list that is not a list."""
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply


async def _ready(conn: AbstractConnection) -> None:
    """Connect ``conn``, or check that an idle one is still in step with Redis (as redis-py's
    pool does on checkout: one with something to read was closed by a Redis that restarted)."""
    if conn.is_connected:
        try:
            stale = _socket_readable(conn) or await conn.can_read()
        except (RedisError, OSError):
            stale = True
        if stale:
            await conn.disconnect()
    if not conn.is_connected:
        await conn.connect()


def _socket_readable(conn: AbstractConnection) -> bool:
    """Whether the kernel holds something to read on an idle connection (data or its close).

    ``can_read`` sees only what the event loop has read into the stream; a sandbox pool
    process runs its loop only during a run, so a close by a Redis that restarted while it
    was idle is still in the kernel at the next call, and that call's push would be lost
    on a dead socket ("may or may not have run"). Asked of the kernel with a zero-timeout
    poll: one syscall."""
    writer = getattr(conn, "_writer", None)
    if writer is not None and writer.transport.is_closing():
        return True  # the loop closed it (a reset or a failed write): redis-py still holds it
    sock = writer.get_extra_info("socket") if writer is not None else None
    if sock is None:
        return False
    if sock.fileno() < 0:  # closed under the writer: poll would refuse -1 (ValueError)
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))
