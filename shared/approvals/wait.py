"""Waiting for a person's answer to a paused call: the gateway that records an answer also
sets a short-lived Redis key; the caller (a sandbox bridge, a direct call) looks at it
twice a second. A lost key costs only the wake-up: the caller asks the toolhost when the
approval expires, and the ``approvals`` row decides."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from shared.queues import approval_answer_key, grant_key

POLL_S = 0.5
# The answer key outlives the approval's own time by this much (a late reader still sees it).
ANSWER_TTL_SLACK_S = 120


async def await_answer(
    redis: aioredis.Redis, *, execution_id: str, call_id: str, until: float
) -> dict[str, Any] | None:
    """The answer (``decision``, ``by``, ``reason``) once given, or None at ``until``; the
    execution's tool grant is kept alive meanwhile (the redeeming call needs it)."""
    key = approval_answer_key(execution_id, call_id)
    await _keep_grant(redis, execution_id, until)
    while True:
        try:
            raw = await redis.get(key)
        except RedisError:
            raw = None  # the row decides when the wait ends
        if raw:
            answer: dict[str, Any] = orjson.loads(raw)
            return answer
        left = until - time.time()
        if left <= 0:
            return None
        await asyncio.sleep(min(POLL_S, left))


async def _keep_grant(redis: aioredis.Redis, execution_id: str, until: float) -> None:
    needed = int(until - time.time()) + ANSWER_TTL_SLACK_S
    try:
        ttl = await redis.ttl(grant_key(execution_id))
        if 0 <= ttl < needed:
            await redis.expire(grant_key(execution_id), needed)
    except RedisError:  # the redeeming call is refused (grant gone) rather than run unchecked
        pass


def answer_payload(*, approve: bool, by: str, reason: str | None) -> bytes:
    """What the answer key holds."""
    return orjson.dumps({"decision": "approve" if approve else "deny", "by": by, "reason": reason})
