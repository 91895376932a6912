"""ASGI middleware: a request for an MCP session this replica does not run goes to the
replica that does, or, when that one died, this replica takes the session over."""

from __future__ import annotations

import contextlib
import json
import logging

import anyio
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.buffered import buffered
from services.gateway.mcp.replicas.calls import RESENT, pending_calls
from services.gateway.mcp.replicas.forwarding import OwnerLost, forward
from services.gateway.mcp.replicas.manager import FORWARDED, TAKING_OVER, caller
from services.gateway.mcp.replicas.registry import Registry, SessionRecord, holder_of
from services.gateway.mcp.replicas.settings_kept import keeping, kept

log = logging.getLogger(__name__)

_SESSION_HEADER = b"mcp-session-id"
# Headers of the request that led to a take-over that the replayed opening must not carry.
_OPENING_DROPS = {
    _SESSION_HEADER,
    b"last-event-id",
    b"mcp-protocol-version",
    b"content-type",
    b"content-length",
    b"accept",
}


def is_mcp_path(path: str) -> bool:
    """The streamable-HTTP endpoints: ``/mcp``, ``/mcp/servers`` and ``/mcp/servers/<name>``."""
    return path == "/mcp" or path == "/mcp/servers" or path.startswith("/mcp/servers/")


class SessionRouter:
    """Serves here a request without a session, or for a session this replica runs;
    forwards one for a session another live replica runs; takes over the session of one
    that died (re-opening it here under the same id), then serves the request here. A
    request whose caller is not the session's holder (``holder_of``) is answered 404 on
    every replica, before anything is forwarded or taken over."""

    def __init__(self, app: ASGIApp, *, registry: Registry) -> None:
        self.app = app
        self.registry = registry
        self._taking_over: dict[str, anyio.Lock] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_mcp_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is None:
            await self.app(scope, receive, send)
            return
        holder = holder_of(caller(scope))
        if session_id in self.registry.local:
            await self._serve_local(session_id, holder, scope, receive, send)
            return
        if scope.get(FORWARDED):  # served here or not at all: the session manager answers
            await self.app(scope, receive, send)
            return
        body, replayed = await buffered(receive)
        for _ in range(3):  # an owner that dies under us, then one that won a race, then here
            if session_id in self.registry.local:
                break
            record = await self.registry.record(session_id)
            if record is not None and record.holder != holder:
                await _not_found(session_id, scope, replayed, send)
                return
            if record is None or record.owner == self.registry.replica_id:
                break  # ended (or ending here): the session manager answers 404
            if await self.registry.alive(record.owner):
                try:
                    await forward(
                        self.registry, owner=record.owner, scope=scope, body=body,
                        receive=receive, send=send,
                    )  # fmt: skip
                    return
                except OwnerLost:
                    continue
            if await self._take_over(session_id, record, scope):
                break
        if session_id not in self.registry.local:
            await self.app(scope, replayed, send)  # the session manager answers 404
            return
        await self._serve_local(session_id, holder, scope, replayed, send)

    async def _serve_local(
        self, session_id: str, holder: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request for a session this replica runs: its holder's, served here."""
        if self.registry.holders.get(session_id) != holder:
            await _not_found(session_id, scope, receive, send)
            return
        if scope["method"] == "POST":  # what it sets on the session, kept for a take-over
            ttl_s = self.registry.session_ttl_s
            receive = keeping(self.registry.redis, session_id, receive, ttl_s=ttl_s)
        await self.app(scope, receive, send)

    async def _take_over(self, session_id: str, record: SessionRecord, scope: Scope) -> bool:
        """Re-open a dead replica's session here, under its id; False if another replica
        claimed it first (or it could not be re-opened)."""
        lock = self._taking_over.setdefault(session_id, anyio.Lock())
        try:
            async with lock:
                if session_id in self.registry.local:
                    return True
                if not await self.registry.take_over(session_id, dead_owner=record.owner):
                    return False
                log.info("taking over MCP session %s of replica %s", session_id[:8], record.owner)
                token = TAKING_OVER.set(session_id)
                try:
                    opened = await _call(self.app, _opening(scope, record), record.init)
                finally:
                    TAKING_OVER.reset(token)
                if opened >= 400 or session_id not in self.registry.local:
                    log.warning("MCP session %s not re-opened (%d)", session_id[:8], opened)
                    return False
                reopened = _opening(scope, record, session_id=session_id)
                initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
                await _call(self.app, reopened, initialized)
                # What the client set on the session (log level, subscriptions), set again.
                for request in await kept(self.registry.redis, session_id):
                    await _call(self.app, reopened, request)
                # The calls the dead owner was waiting on go on here; their client resumes
                # their streams (Last-Event-ID) and hears the rest. Each is sent as its
                # client sent it, the stream of the POST dropped at once (the client's
                # own reconnect takes the events from the event store, then live).
                resent = {**reopened, RESENT: True}
                for call in await pending_calls(self.registry.redis, session_id):
                    await _call(self.app, resent, json.dumps(call).encode(), hang_up=True)
                return True
        finally:
            if not lock.locked():
                self._taking_over.pop(session_id, None)


async def _not_found(session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a caller other than the session's holder: exactly the answer to an
    unknown session (404, as the SDK gives it), so a guessed or leaked id tells nothing."""
    log.warning("refused MCP session %s to a caller that does not hold it", session_id[:8])
    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message="Session not found")
    )
    response = Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=404,
        media_type="application/json",
    )
    await response(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _opening(scope: Scope, record: SessionRecord, *, session_id: str | None = None) -> Scope:
    """A POST to the session's endpoint as the caller: its opening request, or (with
    ``session_id``) the notification that the client took the answer."""
    headers = [(k, v) for k, v in scope["headers"] if k not in _OPENING_DROPS]
    headers += [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
    ]
    if session_id is not None:
        headers.append((_SESSION_HEADER, session_id.encode()))
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            version = json.loads(record.init)["params"]["protocolVersion"]
            headers.append((b"mcp-protocol-version", str(version).encode()))
    path = record.path or scope["path"]
    return {**scope, "method": "POST", "path": path, "raw_path": path.encode(), "headers": headers}


async def _call(app: ASGIApp, scope: Scope, body: bytes, *, hang_up: bool = False) -> int:
    """Run one request through ``app``, its answer read and dropped (or, ``hang_up``, the
    connection closed as soon as the request was read); its status."""
    status = 500
    done = anyio.Event()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if not hang_up:
            await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    done.set()
    return status
