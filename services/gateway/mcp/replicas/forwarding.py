"""One HTTP exchange carried over Redis to the replica that owns its MCP session, and back.

The receiving replica pushes the request (method, path, headers, body) onto the owner's
inbox list; the owner runs it through its own app as if it had arrived there, and pushes
each ASGI message of the response onto the exchange's ``out`` list, which the receiving
replica writes to its client as it comes: an SSE stream flows through part by part. When the
client hangs up, the receiving replica says so on the exchange's ``in`` list; when either
replica dies, the other notices its missing heartbeat and ends the exchange. The request
carries its caller as the receiving replica authenticated it, signed (``vouched.py``): the
owner checks no credential a second time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from typing import Any

import anyio
import redis.asyncio as aioredis
from anyio.abc import TaskGroup
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.auth import VOUCHED
from services.gateway.mcp.replicas.manager import FORWARDED, caller
from services.gateway.mcp.replicas.registry import Registry
from services.gateway.mcp.replicas.vouched import opened, seal
from shared.auth.principal import Principal
from shared.queues import mcp_forward_key, mcp_inbox_key

log = logging.getLogger(__name__)

# How long one BLPOP blocks: under the async client's 5 s socket timeout (state.py), and
# the period at which a waiting side checks the other's heartbeat.
POLL_S = 1.0
# An exchange's lists outlive a replica that died mid-way by this long, then go.
EXCHANGE_TTL_S = 120
# Response parts on the ``out`` list: start (status, headers), body (more to come), end.
_START, _BODY, _END = b"S", b"B", b"E"
_HANG_UP = b"D"
# Checked here, never again on the owner (it takes the signed caller): they stay out of Redis.
_CREDENTIALS = {b"authorization", b"dpop", b"cookie"}


class OwnerLost(Exception):
    """Raised when the owning replica died before it answered: nothing was sent yet."""


async def forward(
    registry: Registry,
    *,
    owner: str,
    scope: Scope,
    body: bytes,
    receive: Receive,
    send: Send,
) -> None:
    """Serve this request on ``owner``; raises OwnerLost if it died before answering."""
    redis = registry.redis
    exchange = uuid.uuid4().hex
    message = {
        "id": exchange,
        "from": registry.replica_id,
        "method": scope["method"],
        "path": scope["path"],
        "raw_path": (scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
        "query_string": scope.get("query_string", b"").decode("latin-1"),
        "headers": [
            [k.decode("latin-1"), v.decode("latin-1")]
            for k, v in scope["headers"]
            if k not in _CREDENTIALS
        ],
        "client": list(scope["client"]) if scope.get("client") else None,
        "scheme": scope.get("scheme", "http"),
        "http_version": scope.get("http_version", "1.1"),
        "body": body.decode("latin-1"),
    }
    inbox = mcp_inbox_key(owner)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.rpush(inbox, seal(registry.forward_key, message, principal=caller(scope)))
        pipe.expire(inbox, EXCHANGE_TTL_S)
        await pipe.execute()
    out, hang_up = mcp_forward_key(exchange, "out"), mcp_forward_key(exchange, "in")
    started = lost = False
    async with anyio.create_task_group() as group:

        async def client_gone() -> None:  # the body was read: receive() now waits for hang-up
            while (await receive())["type"] != "http.disconnect":
                pass
            with anyio.CancelScope(shield=True):
                await _push(redis, hang_up, _HANG_UP)
            group.cancel_scope.cancel()

        group.start_soon(client_gone)
        while True:
            popped = await redis.blpop([out], timeout=POLL_S)
            if popped is None:
                if not await registry.alive(owner):
                    log.warning("replica %s died while serving a forwarded request", owner)
                    lost = True
                    break
                continue
            part = popped[1]
            kind, payload = part[:1], part[1:]
            if kind == _START:
                status, headers = json.loads(payload)
                started = True
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                    }
                )
            else:
                await send(
                    {"type": "http.response.body", "body": payload, "more_body": kind == _BODY}
                )
                if kind == _END:
                    break
        group.cancel_scope.cancel()
    if lost and not started:
        raise OwnerLost(owner)
    if lost:  # the client sees the stream end, and resumes it elsewhere (Last-Event-ID)
        with contextlib.suppress(OSError, RuntimeError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve_inbox(registry: Registry, app: ASGIApp, group: TaskGroup) -> None:
    """Run the requests other replicas forward to this one, each in ``group``."""
    redis = registry.redis
    inbox = mcp_inbox_key(registry.replica_id)
    while True:
        try:
            popped = await redis.blpop([inbox], timeout=POLL_S)
        except RedisError as exc:  # Redis is down: nothing can be forwarded meanwhile
            log.warning("forwarded requests not read: %s", exc)
            await anyio.sleep(POLL_S)
            continue
        if popped is None:
            continue
        raw = popped[1]
        sealed = raw.encode() if isinstance(raw, str) else raw
        try:
            message, principal = opened(registry.forward_key, sealed, max_age_s=EXCHANGE_TTL_S)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("forwarded request refused: %s", exc)
            await _refuse(redis, sealed)
            continue
        group.start_soon(_serve_one, registry, app, message, principal)


async def _serve_one(
    registry: Registry, app: ASGIApp, message: dict[str, Any], principal: Principal
) -> None:
    redis = registry.redis
    exchange, sender = message["id"], message["from"]
    out, hang_up = mcp_forward_key(exchange, "out"), mcp_forward_key(exchange, "in")
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": message["http_version"],
        "method": message["method"],
        "scheme": message["scheme"],
        "path": message["path"],
        "raw_path": message["raw_path"].encode("latin-1"),
        "root_path": "",
        "query_string": message["query_string"].encode("latin-1"),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in message["headers"]],
        "client": tuple(message["client"]) if message["client"] else None,
        "server": None,
        "state": {},
        FORWARDED: True,
        VOUCHED: principal,  # the auth gate takes it: the credential was checked on arrival
    }
    body: bytes | None = message["body"].encode("latin-1")

    async def receive() -> Message:
        nonlocal body
        if body is not None:
            sent, body = body, None
            return {"type": "http.request", "body": sent, "more_body": False}
        while True:  # the client's hang-up, or the death of the replica it is connected to
            if await redis.blpop([hang_up], timeout=POLL_S) is not None:
                return {"type": "http.disconnect"}
            if not await registry.alive(sender):
                return {"type": "http.disconnect"}

    ended = started = False

    async def send(part: Message) -> None:
        nonlocal ended, started
        if part["type"] == "http.response.start":
            started = True
            headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in part["headers"]]
            await _push(redis, out, _START + json.dumps([part["status"], headers]).encode())
        elif part["type"] == "http.response.body":
            kind = _BODY if part.get("more_body") else _END
            ended = kind == _END
            await _push(redis, out, kind + part.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception:
        log.exception("forwarded request %s %s failed", message["method"], message["path"])
    finally:  # the receiving replica waits for an end: it always gets one
        if not ended:
            with anyio.CancelScope(shield=True):
                if not started:
                    await _push(redis, out, _START + json.dumps([500, []]).encode())
                await _push(redis, out, _END)


async def _refuse(redis: aioredis.Redis, sealed: bytes) -> None:
    """Answer 503 to a forwarded request that is not served (its sender, say a replica of an
    older version during an upgrade, would otherwise wait for its client to hang up)."""
    for raw in (sealed[64:], sealed):  # signed, or as an older replica sends it
        with contextlib.suppress(ValueError, TypeError, KeyError, UnicodeDecodeError):
            out = mcp_forward_key(str(json.loads(raw)["id"]), "out")
            await _push(redis, out, _START + json.dumps([503, []]).encode())
            await _push(redis, out, _END)
            return


async def _push(redis: aioredis.Redis, key: str, value: bytes) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.rpush(key, value)
        pipe.expire(key, EXCHANGE_TTL_S)
        await pipe.execute()
