"""A session's tool calls that wait on executions, kept in Redis so that a replica taking
the session over runs them on: the same request id, the same execution, and the client's
stream going on after the last run event it was sent (not one twice, none missing)."""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import redis.asyncio as aioredis
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from redis.exceptions import RedisError

from shared.queues import mcp_calls_key, mcp_events_key

# The _meta key of a notification that passes on a run event: that event's sequence number.
EVENT_META = "agentcards/event"
# The run event being passed on (set by the passthrough around each event it forwards).
RUN_EVENT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agentcards_run_event", default=None
)
# A call record outlives its session's key by nothing: both go with the session.
CALL_TTL_S = 7 * 86400
# Marks (in the ASGI scope) a call the replica taking a session over re-sends: only such a
# call looks for its record, so no other call pays the lookup.
RESENT = "agentcards.resent"


def session_of(ctx: Context) -> str | None:
    """The 2025-11-25 session this request belongs to (None at 2026-07-28, or over stdio)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return headers.get(MCP_SESSION_ID_HEADER) if headers is not None else None


def event_meta(ctx: Context) -> dict[str, Any] | None:
    """The _meta a notification passing on the current run event carries in a session."""
    seq = RUN_EVENT.get()
    if seq is None or session_of(ctx) is None:
        return None
    return {EVENT_META: seq}


@dataclass(frozen=True, slots=True)
class SessionCall:
    """A call of a session, as ``remembered`` keeps it on record: queued on a pipeline the
    call sends anyway (a direct call's admission and end), it costs no round trip."""

    key: str
    field: str
    params: dict[str, Any]
    ttl_s: int

    def queue_keep(self, pipe: Any, *, execution_id: str) -> None:
        """On record: the call waits on ``execution_id``."""
        record = {"execution_id": execution_id, "params": self.params}
        pipe.hset(self.key, self.field, json.dumps(record))
        pipe.expire(self.key, self.ttl_s)

    def queue_forget(self, pipe: Any) -> None:
        """Off record: the call ended."""
        pipe.hdel(self.key, self.field)


def session_call(ctx: Context, *, ttl_s: int) -> SessionCall | None:
    """The call ``ctx`` serves as its session keeps it (None: not in a 2025-11-25 session)."""
    session_id = session_of(ctx)
    if session_id is None:
        return None
    request = ctx.request_context
    return SessionCall(
        key=mcp_calls_key(session_id),
        field=json.dumps(request.request_id),
        params=dict(request.params or {}),
        ttl_s=ttl_s,
    )


@contextlib.asynccontextmanager
async def remembered(
    redis: aioredis.Redis, ctx: Context, *, execution_id: str, ttl_s: int, kept: bool = False
) -> AsyncIterator[None]:
    """While the block waits on ``execution_id``, the call is on record for its session; a
    call that ends (answered, failed, cancelled by its client) is forgotten. One cut short
    by its replica stopping stays on record, for the replica that takes the session over.
    ``kept``: put on record already, and forgotten when it ended normally
    (``SessionCall``, a direct call's admission and end), so only other ends are left here."""
    call = session_call(ctx, ttl_s=ttl_s)
    if call is None:
        yield
        return
    if not kept:
        with contextlib.suppress(RedisError):  # not fatal: the call just is not resumable
            async with redis.pipeline(transaction=False) as pipe:
                call.queue_keep(pipe, execution_id=execution_id)
                await pipe.execute()
    ended = False
    try:
        yield
        if kept:  # its end forgot it
            return
        ended = True
    except anyio.get_cancelled_exc_class():
        ended = client_cancelled(ctx)
        raise
    except BaseException:
        ended = True
        raise
    finally:
        if ended:
            with anyio.CancelScope(shield=True), contextlib.suppress(RedisError):
                await redis.hdel(call.key, call.field)


async def forget(redis: aioredis.Redis, ctx: Context) -> None:
    """Take the call ``ctx`` serves off its session's record: it ended (best effort)."""
    call = session_call(ctx, ttl_s=0)
    if call is not None:
        with contextlib.suppress(RedisError):
            await redis.hdel(call.key, call.field)


async def interrupted(redis: aioredis.Redis, ctx: Context) -> tuple[str, int] | None:
    """The execution this request already waited on before its replica died, and the last
    of its events the client was sent (None: a new call)."""
    session_id = session_of(ctx)
    scope = getattr(ctx.request_context.request, "scope", None) or {}
    if session_id is None or not scope.get(RESENT):
        return None
    request_id = ctx.request_context.request_id
    found = await redis.hget(mcp_calls_key(session_id), json.dumps(request_id))
    if found is None:
        return None
    execution_id = str(json.loads(found)["execution_id"])
    return execution_id, await delivered(redis, session_id, str(request_id))


async def delivered(redis: aioredis.Redis, session_id: str, stream_id: str) -> int:
    """The last run event a session's stream ``stream_id`` carried (as stored: what a
    resuming client is replayed), 0 for none."""
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await redis.xrange(  # type: ignore[assignment]
        mcp_events_key(session_id)
    )
    last = 0
    for _, fields in entries:
        if fields.get(b"s", b"").decode() != stream_id or not fields.get(b"m"):
            continue
        meta = (json.loads(fields[b"m"]).get("params") or {}).get("_meta") or {}
        if isinstance(meta.get(EVENT_META), int):
            last = max(last, meta[EVENT_META])
    return last


async def pending_calls(redis: aioredis.Redis, session_id: str) -> list[dict[str, Any]]:
    """The session's calls on record, as the JSON-RPC requests that started them."""
    found: dict[bytes, bytes] = await redis.hgetall(mcp_calls_key(session_id))  # type: ignore[assignment]
    return [
        {
            "jsonrpc": "2.0",
            "id": json.loads(field),
            "method": "tools/call",
            "params": json.loads(value)["params"],
        }
        for field, value in found.items()
    ]


def client_cancelled(ctx: Context) -> bool:
    """Whether the client sent ``notifications/cancelled`` for this request. The SDK keeps the
    flag on the request's dispatch context, which the session holds (mcp 2.3)."""
    outbound = getattr(ctx.session, "_request_outbound", None)
    flag = getattr(outbound, "cancel_requested", None)
    return bool(flag is not None and flag.is_set())
