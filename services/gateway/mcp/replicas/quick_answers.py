"""A session's ``tools/call`` answered as plain JSON when it ends quickly with nothing else to
send, its resumable SSE stream opened only when it needs one.

The SDK's transport answers every request of a 2025-11-25 session with an SSE stream: a
priming event, the answer stored in the session's event store (a Redis round trip), then
sent as an event through every middleware, under sse-starlette's task group — about a sixth
of the gateway's CPU for a direct call. Here the choice waits: the request is dispatched as
the SDK dispatches it, and if its answer comes within ``window_s`` before any other message
for it (progress, a log line, a server's request), it goes back as ``application/json``
(the transport may answer either way, at every revision) and is not stored. Otherwise —
the first other message, or the window's end — the stream opens as the SDK opens it:
priming event first (its id, ``retry:``), every event stored with its id, ``Last-Event-ID``
replays from Redis. What that costs: during the window a client has no event id yet, so a
connection lost then (or a replica that dies then) cannot be resumed, as for any JSON answer;
a call that may outlive the window gets its stream, and its priming event, when the window
ends. Hooks ``_handle_post_request`` of the SDK's transport (mcp 2.3, pinned).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.streamable_http import (
    CONTENT_TYPE_SSE,
    MCP_SESSION_ID_HEADER,
    REQUEST_CANCELLED,
    EventMessage,
)
from mcp.server.streamable_http import SSEEvent as SSEEvent
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from services.gateway.mcp.replicas.events import RedisEventStore
    from services.gateway.mcp.replicas.manager import PrimedTransport

log = logging.getLogger(__name__)

# How many messages a request's stream holds before the router waits (the SDK's figure).
_BUFFER = 100
# Put on a request's stream when its window ended first: it opens its SSE stream.
_WINDOW_ENDED = EventMessage(JSONRPCNotification(jsonrpc="2.0", method="agentcards/window"), None)


def quick_call(body: bytes) -> JSONRPCRequest | None:
    """The ``tools/call`` request ``body`` holds (None: another message)."""
    if b'"tools/call"' not in body:
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(
            pydantic_core.from_json(body), by_name=False
        )
    except (ValueError, ValidationError):
        return None  # the SDK's own path answers the parse or validation error
    if isinstance(message, JSONRPCRequest) and message.method == "tools/call":
        return message
    return None


async def answer(
    transport: PrimedTransport,
    store: RedisEventStore,
    message: JSONRPCRequest,
    *,
    window_s: float,
    scope: Scope,
    request: Request,
    receive: Receive,
    send: Send,
) -> None:
    """Dispatch ``message`` (its headers already checked) and answer it as JSON or SSE."""
    writer = transport._read_stream_writer
    assert writer is not None  # connect() ran: the session manager serves only open sessions
    request_id = str(message.id)
    version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
    streams: tuple[MemoryObjectSendStream[EventMessage], MemoryObjectReceiveStream[EventMessage]]
    streams = anyio.create_memory_object_stream(_BUFFER)  # unsubscripted: no typing cache lookup
    transport._request_streams[request_id] = streams
    reader = streams[1]
    store.defer(request_id)
    await writer.send(transport._create_session_message(message, request, request_id, version))
    # The window is a timer, not a cancelled receive: anyio's receive drops an item handed
    # over as it is cancelled, and that item may be the answer the store did not keep.
    timer = asyncio.get_running_loop().call_later(
        window_s, _end_window, store, request_id, streams[0]
    )
    first: EventMessage | None = None
    closed = False
    try:
        first = await reader.receive()
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        closed = True
    finally:
        timer.cancel()
        if first is None:
            store.commit(request_id)  # whatever comes later is stored for a resuming client
    if closed and transport.is_terminated:
        await transport._clean_up_memory_streams(request_id)
        response = transport._create_error_response(
            "Session terminated before the request completed",
            HTTPStatus.INTERNAL_SERVER_ERROR,
            INTERNAL_ERROR,
        )
        await response(scope, receive, send)
        return
    if first is _WINDOW_ENDED:
        first = None
    if (
        first is not None
        and not first.event_id  # not stored: the window's answer
        and isinstance(first.message, JSONRPCResponse | JSONRPCError)
        and not _cancelled(first.message)
    ):
        await transport._clean_up_memory_streams(request_id)
        await transport._create_json_response(first.message)(scope, receive, send)
        return
    await _stream(transport, request_id, version, first, reader, scope, receive, send)


def _cancelled(message: JSONRPCResponse | JSONRPCError) -> bool:
    """The end the SDK gives a request its client cancelled (``REQUEST_CANCELLED``): not an
    answer anyone waits for. It ends the POST's stream as the SDK ends it after the window,
    as an SSE event: the SDK's client drops an event of a request it abandoned, but a JSON
    body that reaches it after its session closed fails its transport's task group."""
    return isinstance(message, JSONRPCError) and message.error.code == REQUEST_CANCELLED


def _end_window(
    store: RedisEventStore, request_id: str, stream: MemoryObjectSendStream[EventMessage]
) -> None:
    """The window's end, unless the request's first message came before it."""
    if store.commit(request_id):
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            stream.send_nowait(_WINDOW_ENDED)  # nothing was sent on it yet: there is room


async def _stream(
    transport: PrimedTransport,
    request_id: str,
    version: str,
    first: EventMessage | None,
    reader: MemoryObjectReceiveStream[EventMessage],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """The request's SSE stream as the SDK opens it: priming event, ``first``, then the rest."""
    priming = await transport._mint_priming_event(request_id, version)
    sse_writer, sse_reader = anyio.create_memory_object_stream[SSEEvent](0)
    transport._sse_stream_writers[request_id] = sse_writer
    session_id = transport.mcp_session_id
    headers = {
        "Cache-Control": "no-cache, no-transform",
        "Connection": "keep-alive",
        "Content-Type": CONTENT_TYPE_SSE,
        **({MCP_SESSION_ID_HEADER: session_id} if session_id else {}),
    }
    response = EventSourceResponse(
        content=sse_reader,
        data_sender_callable=partial(
            _write_events, transport, request_id, sse_writer, reader, priming, first
        ),
        headers=headers,
    )
    try:
        await response(scope, receive, send)
    except Exception:
        log.exception("SSE response error")
        await sse_writer.aclose()
        await transport._clean_up_memory_streams(request_id)
    finally:
        await sse_reader.aclose()


async def _write_events(
    transport: PrimedTransport,
    request_id: str,
    sse_writer: MemoryObjectSendStream[SSEEvent],
    reader: MemoryObjectReceiveStream[EventMessage],
    priming: SSEEvent | None,
    first: EventMessage | None,
) -> None:
    """The priming event and ``first`` (received during the window), then what the SDK's
    writer sends: the request's events until its answer."""
    ended = first is not None and isinstance(first.message, JSONRPCResponse | JSONRPCError)
    try:
        if priming is not None:
            await sse_writer.send(priming)
        if first is not None:
            await sse_writer.send(transport._create_event_data(first))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        log.debug("SSE stream of request %s closed", request_id)
        ended = True
    if ended:
        await sse_writer.aclose()
        transport._sse_stream_writers.pop(request_id, None)
        await transport._clean_up_memory_streams(request_id)
        return
    await transport._run_sse_writer(request_id, sse_writer, reader, None)
