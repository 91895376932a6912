"""RpcClient against a real Redis with no toolhost behind it: at-most-once and deadlines."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
import redis

from shared.errors import ErrorType
from shared.queues import RPC_REQUESTS
from shared.rpc.client import RpcClient

pytestmark = pytest.mark.integration


async def test_lost_reply_is_a_timeout_and_never_retried(redis_url: str) -> None:
    async with RpcClient(redis_url) as client:
        started = time.monotonic()
        reply = await client.call(
            execution_id="e", tool="example:add", args={"a": 1}, deadline=time.time() + 0.5
        )
    assert reply.error and reply.error.type == ErrorType.TIMEOUT
    assert 0.5 <= time.monotonic() - started < 2
    queued = redis.Redis.from_url(redis_url).lrange(RPC_REQUESTS, 0, -1)
    assert len(queued) == 1  # pushed exactly once, never again
    assert orjson.loads(queued[0])["call_id"] == reply.call_id


async def test_past_deadline_and_out_of_scope_are_not_sent(redis_url: str) -> None:
    async with RpcClient(redis_url) as client:
        late = await client.call(execution_id="e", tool="a:b", args={}, deadline=time.time() - 1)
        denied = await client.call(
            execution_id="e", tool="a:b", args={}, deadline=time.time() + 5, allowed=["a:c"]
        )
        invalid = await client.call(
            execution_id="e", tool="nocolon", args={}, deadline=time.time() + 5
        )
    assert late.error and late.error.type == ErrorType.TIMEOUT
    assert denied.error and denied.error.type == ErrorType.TOOL_NOT_ALLOWED
    assert invalid.error and invalid.error.type == ErrorType.INVALID_REQUEST
    assert redis.Redis.from_url(redis_url).llen(RPC_REQUESTS) == 0


async def test_a_call_that_finds_every_connection_busy_until_its_deadline_is_not_sent(
    redis_url: str,
) -> None:
    redis.Redis.from_url(redis_url).delete(RPC_REQUESTS)
    async with RpcClient(redis_url, max_connections=1) as client:
        first = asyncio.create_task(
            client.call(execution_id="e", tool="a:b", args={}, deadline=time.time() + 0.8)
        )
        await asyncio.sleep(0.1)  # the first call holds the one connection, waiting
        second = await client.call(
            execution_id="e", tool="a:c", args={}, deadline=time.time() + 0.3
        )
        await first
    assert second.error and second.error.type == ErrorType.TIMEOUT
    assert "was not sent" in second.error.message
    plain = redis.Redis.from_url(redis_url)
    queued: list[bytes] = plain.lrange(RPC_REQUESTS, 0, -1)  # type: ignore[assignment]
    plain.delete(RPC_REQUESTS)
    assert [orjson.loads(q)["tool"] for q in queued] == ["a:b"]


async def test_redis_down_is_a_structured_error() -> None:
    async with RpcClient("redis://127.0.0.1:1/0") as client:
        reply = await client.call(execution_id="e", tool="a:b", args={}, deadline=time.time() + 2)
    assert reply.error and reply.error.type == ErrorType.TOOL_UNAVAILABLE
    assert "Redis" in reply.error.message


async def test_a_backlog_is_served_oldest_call_first(redis_url: str) -> None:
    # Toolhosts BLPOP the head: the call waiting longest (closest to its deadline) goes first.
    redis.Redis.from_url(redis_url).delete(RPC_REQUESTS)
    async with RpcClient(redis_url) as client:
        for n in range(3):
            await client.call(
                execution_id="e", tool=f"example:t{n}", args={}, deadline=time.time() + 0.2
            )
    queued = redis.Redis.from_url(redis_url).lrange(RPC_REQUESTS, 0, -1)
    assert [orjson.loads(q)["tool"] for q in queued] == ["example:t0", "example:t1", "example:t2"]
