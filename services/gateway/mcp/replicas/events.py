"""The SSE events of an MCP session, kept in Redis so a client resumes on any replica."""

from __future__ import annotations

from urllib.parse import quote, unquote

import redis.asyncio as aioredis
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter
from redis.exceptions import ResponseError

from shared.queues import mcp_events_key
from shared.rpc.wire import Lines, raise_refused

Entry = tuple[bytes, dict[bytes, bytes]]  # a stream entry as redis-py reads it (bytes)

# A request stream's priming event id: ``p:<entry id its stream was replayed to, or empty>:``
# then the stream's id, percent-encoded. Entry ids (``<ms>-<seq>``) never start with it.
PRIMED = "p:"


class RedisEventStore(EventStore):
    """One Redis stream per session, its entry ids the SSE event ids: every stream of the
    session (each POST's, the GET stream) interleaved, each entry naming its own. Keeps the
    last ``keep`` events (approximately: ``MAXLEN ~``) for ``ttl_s`` after the latest."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        session_id: str,
        keep: int,
        ttl_s: int,
        lines: Lines | None = None,
    ) -> None:
        self._redis = redis
        self._lines = lines  # sends an event's append (else ``redis``' pipeline)
        self._key = mcp_events_key(session_id)
        self._keep = keep
        self._ttl_s = ttl_s
        # Per stream: the last entry a replay of it sent (or its anchor): a priming event
        # minted after that replay resumes after it, not from the stream's start.
        self._replayed: dict[StreamId, str] = {}
        # Request streams whose answer may still leave as plain JSON (``quick_answers.py``):
        # their first message decides, once — an answer is not stored, anything else is, and
        # so is every message after it.
        self._deferred: set[StreamId] = set()

    def defer(self, stream_id: StreamId) -> None:
        """``stream_id``'s answer is not stored if it is the stream's first message."""
        self._deferred.add(stream_id)

    def commit(self, stream_id: StreamId) -> bool:
        """Store every message of ``stream_id`` from now on; False if its first message
        decided that already (it is on its way to the stream's reader)."""
        if stream_id in self._deferred:
            self._deferred.discard(stream_id)
            return True
        return False

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Append (``None``: a stream's priming event, replayed as nothing).

        A request's stream is primed without a write: its id (the JSON-RPC request id, never
        reused in a session) is in the priming event's id, and every event of that stream
        comes after its priming, so nothing needs storing to resume from it (one Redis
        round trip less per request). Primed again after a replay, the id also names the
        last entry replayed. The GET stream's id is the same for every GET of a session: its
        priming is stored, an entry like any other."""
        if stream_id in self._deferred:
            self._deferred.discard(stream_id)
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                return ""  # answered as JSON: no event, no id
        if message is None and stream_id != GET_STREAM_KEY:
            return f"{PRIMED}{self._replayed.get(stream_id, '')}:{quote(stream_id, safe='')}"
        data = (
            b""
            if message is None
            else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        )
        pipe = self._redis.pipeline(transaction=False)
        pipe.xadd(self._key, {"s": stream_id, "m": data}, maxlen=self._keep, approximate=True)
        pipe.expire(self._key, self._ttl_s)
        if self._lines is None:
            async with pipe:
                event_id, _ = await pipe.execute()
        else:
            event_id, expired = await self._lines.send_queued(pipe)
            raise_refused(event_id, expired)
        return event_id.decode() if isinstance(event_id, bytes) else str(event_id)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the events of ``last_event_id``'s stream that came after it; that stream's id
        (None: unknown or no longer kept, the client starts over)."""
        found = await self.locate(last_event_id)
        if found is None:
            return None
        return await self.replay(*found, send_callback)

    async def locate(self, last_event_id: EventId) -> tuple[StreamId, str | None] | None:
        """(the stream ``last_event_id`` belongs to, the entry a replay goes on after: None
        for the stream's start); None when this store did not make it or no longer keeps it."""
        if last_event_id.startswith(PRIMED):
            after, _, quoted = last_event_id.removeprefix(PRIMED).partition(":")
            return unquote(quoted), after or None
        try:
            anchor: list[Entry] = await self._redis.xrange(  # type: ignore[assignment]
                self._key, last_event_id, last_event_id, count=1
            )
        except ResponseError:  # not an id this store made
            return None
        if not anchor:
            return None
        return anchor[0][1][b"s"].decode(), last_event_id

    async def replay(
        self, stream_id: StreamId, after: str | None, send_callback: EventCallback
    ) -> StreamId | None:
        """Send ``stream_id``'s events after the entry ``after`` (None: all of them); None
        when ``after`` is not an entry id this store made."""
        start = "-" if after is None else f"({after}"
        try:
            later: list[Entry] = await self._redis.xrange(self._key, start, "+")  # type: ignore[assignment]
        except ResponseError:  # a priming id naming no entry id: not one this store made
            return None
        last = after
        for entry_id, fields in later:
            if fields[b"s"].decode() != stream_id or not fields[b"m"]:
                continue
            message = jsonrpc_message_adapter.validate_json(fields[b"m"], by_name=False)
            last = entry_id.decode()
            await send_callback(EventMessage(message, last))
        if last is not None:
            self._replayed[stream_id] = last
        return stream_id
