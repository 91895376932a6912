"""The SDK's streamable-HTTP session manager, with its sessions known to every replica."""

from __future__ import annotations

import contextvars
import logging
import uuid
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    LAST_EVENT_ID_HEADER,
    StreamableHTTPServerTransport,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from services.gateway.mcp.replicas import quick_answers
from services.gateway.mcp.replicas.calls import RESENT
from services.gateway.mcp.replicas.events import RedisEventStore
from services.gateway.mcp.replicas.registry import Registry, holder_of
from services.gateway.mcp.replicas.replay import replay_then_live
from shared.auth.principal import ANONYMOUS, Principal
from shared.config import Settings

log = logging.getLogger(__name__)

# Marks a request that came over Redis: it is served here or not at all (never forwarded on).
FORWARDED = "agentcards.forwarded"

# Set while this replica re-opens a session another replica owned: the id it keeps.
TAKING_OVER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentcards_taking_over", default=None
)


class PrimedTransport(StreamableHTTPServerTransport):
    """The SDK's transport, its GET stream primed too: the SDK gives a POST's stream a first
    event with an id and ``retry:``, and the GET stream none, so a client that lost it before
    any notification had no id to resume from; and a ``tools/call`` that ends within
    ``json_within_s`` with nothing else to send answered as JSON (``quick_answers.py``); and
    a resumed stream registered for live messages before its stored ones are read
    (``replay.py``). Hooks ``_handle_get_request``, ``_handle_post_request`` and
    ``_replay_events`` (mcp 2.3)."""

    def __init__(
        self, *, event_store: RedisEventStore, json_within_s: float, **options: Any
    ) -> None:
        super().__init__(event_store=event_store, **options)
        self._events = event_store
        self._json_within_s = json_within_s

    async def _handle_post_request(
        self, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        call = None
        # Not for a forwarded request: nothing sent yet is how its receiving replica knows
        # the owner died before it began (and serves it itself), so its stream opens at
        # once; nor for a call re-sent on a take-over, whose client resumes its stream.
        if self._json_within_s > 0 and not scope.get(FORWARDED) and not scope.get(RESENT):
            call = quick_answers.quick_call(await request.body())  # read once: kept
        if call is None or not self._check_content_type(request):
            await super()._handle_post_request(scope, request, receive, send)
            return
        # The checks the SDK makes before it dispatches a request, by its own methods.
        if not await self._validate_accept_header(request, scope, send):
            return
        if not await self._validate_request_headers(request, send):
            return
        await quick_answers.answer(
            self, self._events, call, window_s=self._json_within_s,
            scope=scope, request=request, receive=receive, send=send,
        )  # fmt: skip

    async def _replay_events(self, last_event_id: str, request: Request, send: Send) -> None:
        found = await self._events.locate(last_event_id)
        if found is None or found[0] in self._request_streams:
            # Unknown to the store (the SDK answers with an empty stream), or the stream is
            # still open here (the SDK sends the stored events and ends: the open one goes on).
            await super()._replay_events(last_event_id, request, send)
            return
        stream_id, after = found
        await replay_then_live(
            self, self._events, stream_id=stream_id, after=after, request=request, send=send
        )

    async def _handle_get_request(self, request: Request, send: Send) -> None:
        store = self._event_store
        if store is None or request.headers.get(LAST_EVENT_ID_HEADER):
            await super()._handle_get_request(request, send)
            return

        async def priming(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.start" and message["status"] == 200:
                event_id = await store.store_event(GET_STREAM_KEY, None)
                retry = f"retry: {self._retry_interval}\r\n" if self._retry_interval else ""
                event = f"id: {event_id}\r\n{retry}data: \r\n\r\n".encode()
                await send({"type": "http.response.body", "body": event, "more_body": True})

        await super()._handle_get_request(request, priming)


class ReplicatedSessionManager(StreamableHTTPSessionManager):
    """Registers each session it opens (owner, endpoint, opening request) in Redis before
    the client learns its id, forgets it when it ends, keeps its SSE events in Redis, and
    can re-open a session under its old id (``TAKING_OVER``) when its owner died.

    Hooks the SDK manager's ``_admit_session``, ``_serve_opening_request`` and
    ``_discard_session`` (mcp 2.3, pinned in constraints.txt).
    """

    def __init__(
        self, app: Any, *, registry: Registry, events: int, json_within_s: float, **options: Any
    ) -> None:
        super().__init__(app, session_idle_timeout=registry.idle_s, **options)
        self.registry = registry
        self._events = events
        self._json_within_s = json_within_s

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        session_id = TAKING_OVER.get() or uuid.uuid4().hex
        transport = PrimedTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=RedisEventStore(
                self.registry.redis,
                lines=self.registry.lines,
                session_id=session_id,
                keep=self._events,
                ttl_s=self.registry.session_ttl_s,
            ),
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
            json_within_s=self._json_within_s,
        )
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    async def _serve_opening_request(
        self,
        http_transport: StreamableHTTPServerTransport,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        session_id = http_transport.mcp_session_id
        assert session_id is not None
        opening = bytearray()

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                opening.extend(message.get("body", b""))
            return message

        async def answering(message: Message) -> None:
            # Known to every replica before the client can send it anywhere.
            if message["type"] == "http.response.start" and message["status"] < 400:
                await self.registry.register(
                    session_id,
                    path=scope["path"],
                    init=bytes(opening),
                    holder=holder_of(caller(scope)),
                    end=lambda: self._discard_session(session_id, http_transport),
                )
            await send(message)

        await super()._serve_opening_request(http_transport, scope, reading, answering)

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        known = session_id in self._server_instances
        await super()._discard_session(session_id, transport)
        if known:
            with anyio.CancelScope(shield=True):
                try:
                    await self.registry.forget(session_id)
                except RedisError as exc:  # its key expires with its last heartbeat renewal
                    log.warning("ended MCP session %s not forgotten: %s", session_id[:8], exc)

    @property
    def open_sessions(self) -> int:
        return len(self._server_instances)


def caller(scope: Scope) -> Principal:
    """Who sent this request (the auth gate's principal; anonymous with auth off)."""
    principal: Principal = (scope.get("state") or {}).get("principal", ANONYMOUS)
    return principal


def transport_security(host: str) -> TransportSecuritySettings:
    """DNS-rebinding protection on a loopback bind (as the SDK's own apps do), off beyond it
    (the gateway's own auth and CORS settings guard it there)."""
    if host in {"127.0.0.1", "localhost", "::1"}:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def session_manager(
    server: Server[Any], *, registry: Registry, settings: Settings
) -> ReplicatedSessionManager:
    """A streamable-HTTP session manager for ``server`` whose sessions every replica serves."""
    return ReplicatedSessionManager(
        server,
        registry=registry,
        events=settings.mcp_session_events,
        json_within_s=settings.mcp_json_answer_ms / 1000,
        retry_interval=settings.mcp_sse_retry_ms,
        max_sessions=settings.mcp_max_sessions,
        security_settings=transport_security(settings.gateway_host),
    )
