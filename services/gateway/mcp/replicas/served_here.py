"""A session's plain ``tools/call`` run by the POST that carries it, without the SDK's read
loop and message router around it.

The SDK hands each request of a session to its dispatcher's read loop (a memory stream, then a
task spawned in the session's task group), and the answer back through the transport's message
router (another stream, another task) to the POST waiting on it: four task switches and two
rendezvous per call around a handler that ran already. Here the POST starts the handler itself
and takes the answer straight from it when nothing else was sent for the call.

What runs is the SDK's own: the session's ``ServerRunner.on_request`` (the middleware chain with
its OpenTelemetry span, validation, the handler, the result's serialization) under
``JSONRPCDispatcher._handle_request`` (the exception-to-wire boundary, cancellation, a request
settled unanswered), with a dispatch context bound to the session's dispatcher: progress, log
lines and the server's requests (sampling, elicitation, roots) go out through the dispatcher and
the router exactly as before, and the first of them opens the request's SSE stream
(``quick_answers.py``); once anything was sent for the call, or its JSON window ended, its answer
goes the SDK's way too (stored, behind what came before it). A ``notifications/cancelled`` finds
the call in the dispatcher's table of requests in flight; a session that ends cancels it.

Taken only for a ``tools/call`` with no progress token, no task, no 2026 envelope, on a session
whose dispatcher runs; anything else (and every request of a session opened before its
connection was known) goes the SDK's way. Hooks ``JSONRPCDispatcher._handle_request`` and
``_JSONRPCDispatchContext`` (mcp 2.3, pinned).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import EventMessage
from mcp.shared.dispatcher import CallOptions, OnRequest, coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    _InFlight,
    _JSONRPCDispatchContext,
    progress_token_from_params,
)
from mcp.shared.message import MessageMetadata
from mcp_types import (
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from starlette.requests import Request

from services.gateway.mcp.replicas.events import RedisEventStore

# The ASGI scope key under which a session's transport offers itself to the capture below.
TRANSPORT = "agentcards.transport"

Answer = JSONRPCResponse | JSONRPCError


def plain(message: JSONRPCRequest) -> bool:
    """Whether ``message`` (a ``tools/call``) needs nothing only the SDK's own path gives: no
    progress token, no task (2025-11-25's task-augmented call), no 2026 envelope."""
    params = message.params
    if params is None:
        return True
    if progress_token_from_params(params) is not None or "task" in params:
        return False
    meta = params.get("_meta")
    return not (isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta)


class ServedHere:
    """The requests of one session served by their POST: its connection, dispatcher and
    runner (the SDK's, as its read loop has them), and the calls in flight."""

    def __init__(self, server: Server[Any], connection: Connection, lifespan: Any) -> None:
        outbound = connection.outbound
        assert isinstance(outbound, JSONRPCDispatcher)  # a session's loop connection
        self.dispatcher: JSONRPCDispatcher[Any] = outbound
        self._on_request: OnRequest = ServerRunner(server, connection, lifespan).on_request
        self._calls: set[asyncio.Task[None]] = set()
        self._scopes: set[anyio.CancelScope] = set()

    @property
    def running(self) -> bool:
        """The session's dispatcher still runs (its outbound path and its table of requests)."""
        return self.dispatcher._running and not self.dispatcher._closed

    def start(
        self,
        message: JSONRPCRequest,
        metadata: MessageMetadata,
        *,
        stream: MemoryObjectSendStream[EventMessage],
        store: RedisEventStore,
    ) -> None:
        """Run ``message`` now; its answer goes to ``stream`` unstored while the store still
        defers its request stream and nothing else was sent for it, else the SDK's way."""
        dispatcher = self.dispatcher
        dctx = _Watched(
            transport=dispatcher._transport_builder(metadata),
            _dispatcher=dispatcher,
            _request_id=message.id,
            message_metadata=metadata,
        )
        stream_id = str(message.id)

        async def deliver(answer: Answer) -> None:
            if not dctx.sent and store.commit(stream_id):  # first, within the window: JSON
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    stream.send_nowait(EventMessage(answer, None))
                return
            await dispatcher._write(answer)  # stored and routed behind what it sent

        scope = anyio.CancelScope()
        # As the read loop registers a request: a notifications/cancelled finds it here.
        dispatcher._in_flight[coerce_request_id(message.id)] = _InFlight(scope=scope, dctx=dctx)
        self._scopes.add(scope)
        handling = _Answering(dispatcher, deliver)._handle_request(
            message, dctx, scope, self._on_request
        )
        task = asyncio.get_running_loop().create_task(handling)  # the POST's context, as
        self._calls.add(task)  # the SDK's spawn takes the sender's

        def ended(done: asyncio.Task[None]) -> None:
            self._calls.discard(done)
            self._scopes.discard(scope)

        task.add_done_callback(ended)

    def cancel(self) -> None:
        """The session ended: its calls in flight are cancelled (as its task group's are)."""
        for scope in list(self._scopes):
            scope.cancel()


@dataclass
class _Watched(_JSONRPCDispatchContext[Any]):
    """The SDK's dispatch context of a request, noting whether anything was sent for it."""

    sent: bool = False

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        self.sent = True
        await super().notify(method, params, opts)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        self.sent = True
        return await super().send_raw_request(method, params, opts)


class _Answering(JSONRPCDispatcher[Any]):
    """The session's dispatcher for one request's ``_handle_request`` (the SDK's), its answer
    handed to ``deliver`` instead of written to the session's stream."""

    def __init__(  # no super().__init__: it shares the session dispatcher's state it reads
        self, session: JSONRPCDispatcher[Any], deliver: Callable[[Answer], Awaitable[None]]
    ) -> None:
        self._in_flight = session._in_flight
        self._raise_handler_exceptions = session._raise_handler_exceptions
        self._deliver = deliver

    async def _write_result(self, request_id: RequestId, result: dict[str, Any]) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._deliver(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))

    async def _write_error(self, request_id: RequestId, error: ErrorData) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._deliver(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


class Capture:
    """Server middleware: at a session's ``initialize``, its transport (offered in the POST's
    scope) learns the session's connection, so its later calls can be served here."""

    def __init__(self, server: Server[Any]) -> None:
        self._server = server

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize" and isinstance(ctx.request, Request):
            transport = ctx.request.scope.get(TRANSPORT)
            if transport is not None:
                connection = ctx.session._connection
                if isinstance(connection.outbound, JSONRPCDispatcher):
                    transport.served_here = ServedHere(
                        self._server, connection, ctx.lifespan_context
                    )
        return await call_next(ctx)
