"""The SSE events of an MCP session, kept in Redis so a client resumes on any replica."""

from __future__ import annotations

import redis.asyncio as aioredis
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter
from redis.exceptions import ResponseError

from shared.queues import mcp_events_key

Entry = tuple[bytes, dict[bytes, bytes]]  # a stream entry as redis-py reads it (bytes)


class RedisEventStore(EventStore):
    """One Redis stream per session, its entry ids the SSE event ids: every stream of the
    session (each POST's, the GET stream) interleaved, each entry naming its own. Keeps the
    last ``keep`` events (approximately: ``MAXLEN ~``) for ``ttl_s`` after the latest."""

    def __init__(self, redis: aioredis.Redis, *, session_id: str, keep: int, ttl_s: int) -> None:
        self._redis = redis
        self._key = mcp_events_key(session_id)
        self._keep = keep
        self._ttl_s = ttl_s

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Append (``None``: a stream's priming event, replayed as nothing)."""
        data = (
            b""
            if message is None
            else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        )
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xadd(self._key, {"s": stream_id, "m": data}, maxlen=self._keep, approximate=True)
            pipe.expire(self._key, self._ttl_s)
            event_id, _ = await pipe.execute()
        return event_id.decode() if isinstance(event_id, bytes) else str(event_id)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the events of ``last_event_id``'s stream that came after it; that stream's id
        (None: unknown or no longer kept, the client starts over)."""
        try:
            anchor: list[Entry] = await self._redis.xrange(  # type: ignore[assignment]
                self._key, last_event_id, last_event_id, count=1
            )
        except ResponseError:  # not an id this store made
            return None
        if not anchor:
            return None
        stream_id = anchor[0][1][b"s"].decode()
        later: list[Entry] = await self._redis.xrange(self._key, f"({last_event_id}", "+")  # type: ignore[assignment]
        for entry_id, fields in later:
            if fields[b"s"].decode() != stream_id or not fields[b"m"]:
                continue
            message = jsonrpc_message_adapter.validate_json(fields[b"m"], by_name=False)
            await send_callback(EventMessage(message, entry_id.decode()))
        return stream_id
