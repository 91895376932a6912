"""A resumed stream (``Last-Event-ID``): the events its session stored after that one, then
what comes live, none lost in between and none sent twice.

The SDK (mcp 2.3, ``StreamableHTTPServerTransport._replay_events``) reads the stored events
first and registers the stream for live messages only after: a message its router stores in
between reaches the store but no connection (its own comment calls it "the replay→live-tail
ordering window"). On a take-over that window is exactly when the new owner passes on what the
client missed of a run, so a client heard ``walk 0, walk 1, walk 3``: step 2 was stored, never
sent, and no later replay would come (the call ended). Here the stream is registered first, so
its live messages wait in its buffer while the stored ones are sent, and a waiting message the
replay sent already (its entry id at or before the replay's last) is not sent again.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.streamable_http import (
    CONTENT_TYPE_SSE,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamId,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import DEFAULT_NEGOTIATED_VERSION
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Send

from services.gateway.mcp.replicas.events import RedisEventStore

log = logging.getLogger(__name__)


def entry_order(event_id: str | None) -> tuple[int, int] | None:
    """A Redis stream entry id (``<ms>-<seq>``) as a sortable pair; None for any other id."""
    ms, dash, seq = (event_id or "").partition("-")
    if not dash or not ms.isdigit() or not seq.isdigit():
        return None
    return int(ms), int(seq)


def sent_already(event_id: str | None, replayed_up_to: str | None) -> bool:
    """Whether a live message with ``event_id`` was among the replayed ones (those up to
    ``replayed_up_to``, an entry id)."""
    live, last = entry_order(event_id), entry_order(replayed_up_to)
    return live is not None and last is not None and live <= last


async def replay_then_live(
    transport: Any,
    store: RedisEventStore,
    *,
    stream_id: StreamId,
    after: str | None,
    request: Request,
    send: Send,
) -> None:
    """Serve a GET resuming ``stream_id`` after the entry ``after`` (None: from its start) on
    ``transport`` (the SDK's, whose ``_request_streams`` the router feeds)."""
    headers = {
        "Cache-Control": "no-cache, no-transform",
        "Connection": "keep-alive",
        "Content-Type": CONTENT_TYPE_SSE,
    }
    if transport.mcp_session_id:
        headers[MCP_SESSION_ID_HEADER] = transport.mcp_session_id
    version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
    # Registered before anything stored is read: from now on the router hands this stream's
    # messages over here (waiting in the buffer), whatever the replay below finds.
    live = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
    transport._request_streams[stream_id] = live
    sse_writer, sse_reader = anyio.create_memory_object_stream[dict[str, Any]](0)

    async def sender() -> None:
        try:
            async with sse_writer:
                transport._sse_stream_writers[stream_id] = sse_writer
                try:
                    replayed_up_to = after

                    async def send_event(message: EventMessage) -> None:
                        nonlocal replayed_up_to
                        await sse_writer.send(transport._create_event_data(message))
                        replayed_up_to = message.event_id

                    if await store.replay(stream_id, after, send_event) is None:
                        return  # ``after`` names no entry of this store: the client starts over
                    priming = await transport._mint_priming_event(stream_id, version)
                    if priming is not None:
                        await sse_writer.send(priming)
                    async with live[1] as messages:
                        async for message in messages:
                            if not sent_already(message.event_id, replayed_up_to):
                                await sse_writer.send(transport._create_event_data(message))
                finally:
                    transport._sse_stream_writers.pop(stream_id, None)
                    await _unregister(transport, stream_id, live)
        except anyio.ClosedResourceError:  # the SDK's close_sse_stream() ended it
            log.debug("resumed SSE stream %s closed", stream_id)
        except Exception:
            log.exception("resumed SSE stream %s failed", stream_id)

    response = EventSourceResponse(content=sse_reader, data_sender_callable=sender, headers=headers)
    try:
        await response(request.scope, request.receive, send)
    finally:
        await sse_writer.aclose()
        await sse_reader.aclose()
        await _unregister(transport, stream_id, live)  # if the sender never ran


async def _unregister(transport: Any, stream_id: StreamId, live: Any) -> None:
    """Close ``live`` and drop it from the transport, unless another connection of the same
    stream registered its own since."""
    if transport._request_streams.get(stream_id) is live:
        await transport._clean_up_memory_streams(stream_id)
    else:
        for end in live:
            await end.aclose()
