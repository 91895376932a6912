"""What a client set on its 2025-11-25 session and the session keeps (its log level, its
resource subscriptions), kept in Redis as the requests that set it: a replica taking the
session over sends them to the re-opened session, which then holds what the client set."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError
from starlette.types import Message, Receive

from shared.queues import mcp_set_key

SET_LEVEL = "logging/setLevel"
SUBSCRIBE, UNSUBSCRIBE = "resources/subscribe", "resources/unsubscribe"


def setting_of(message: Any) -> tuple[str, bool] | None:
    """The field a request sets (or, False, clears), None for a request that sets nothing."""
    if not isinstance(message, dict) or "id" not in message:
        return None
    method = message.get("method")
    if method == SET_LEVEL:
        return SET_LEVEL, True
    uri = (message.get("params") or {}).get("uri")
    if method in {SUBSCRIBE, UNSUBSCRIBE} and isinstance(uri, str):
        return f"{SUBSCRIBE} {uri}", method == SUBSCRIBE
    return None


async def keep(redis: aioredis.Redis, session_id: str, body: bytes, *, ttl_s: int) -> None:
    """Keep what the request ``body`` sets on the session (nothing for other requests)."""
    if SET_LEVEL.encode() not in body and b"resources/" not in body:
        return  # most requests: no parse
    try:
        message = json.loads(body)
    except ValueError:
        return  # the transport answers it
    if (found := setting_of(message)) is None:
        return
    field, kept = found
    key = mcp_set_key(session_id)
    request = {"jsonrpc": "2.0", "id": f"agentcards-set {field}", "method": message["method"]}
    if "params" in message:
        request["params"] = message["params"]
    with contextlib.suppress(RedisError):  # not fatal: a take-over just would not set it
        async with redis.pipeline(transaction=False) as pipe:
            if kept:
                pipe.hset(key, field, json.dumps(request))
                pipe.expire(key, ttl_s)
            else:
                pipe.hdel(key, field)
            await pipe.execute()


def keeping(redis: aioredis.Redis, session_id: str, receive: Receive, *, ttl_s: int) -> Receive:
    """``receive``, keeping what the request it reads sets (``keep``) once it is read."""
    chunks: list[bytes] = []

    async def reading() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                await keep(redis, session_id, b"".join(chunks), ttl_s=ttl_s)
        return message

    return reading


async def kept(redis: aioredis.Redis, session_id: str) -> list[bytes]:
    """The requests that set again what the session's client set (the level first)."""
    found: dict[bytes, bytes] = await redis.hgetall(mcp_set_key(session_id))  # type: ignore[assignment]
    return [found[field] for field in sorted(found)]
