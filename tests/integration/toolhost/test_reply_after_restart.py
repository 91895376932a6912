"""A toolhost that lived through a Redis restart still delivers its replies.

Its idle connections to the old server are dead, and nothing on the RPC path retries: a
reply sent on one would be lost, and a call whose tool already ran (a side effect made)
would end as a timeout with its answer lost. This was the `timeout` of one run in the
supervised fault suite: a note written, its reply never sent. ``shared.rpc.wire.Lines``
asks the kernel whether an idle connection was closed before it reuses one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from deploy.launcher.embedded import EmbeddedRedis, free_port
from services.toolhost.registry import ToolRegistry
from services.toolhost.rpc_server import RpcServer
from shared.queues import rpc_reply_key
from shared.rpc.protocol import RpcReply, decode_reply

pytestmark = pytest.mark.integration


async def test_a_reply_sent_on_a_connection_that_died_with_redis_is_delivered(
    tmp_path: Path,
) -> None:
    server = EmbeddedRedis.start(tmp_path / "redis", port=free_port(), persist=False)
    rpc = RpcServer(redis_url=server.url, registry=ToolRegistry(), reply_ttl_s=30)
    try:
        # Two replies at once: the toolhost's pool now holds two connections to this server.
        await asyncio.gather(
            *(rpc._send(RpcReply(call_id=f"warm{i}", ok=True, duration_ms=0)) for i in range(2))
        )
        server.process.kill()
        server.process.wait()
        server = server.restart()
        await rpc._send(RpcReply(call_id="after", ok=True, result=42, duration_ms=1))
        raw = redis.Redis.from_url(server.url).lpop(rpc_reply_key("after"))
        assert raw is not None, "the reply was lost on a connection that died with Redis"
        assert decode_reply(raw).result == 42
        ttl = redis.Redis.from_url(server.url).ttl(rpc_reply_key("after"))
        assert ttl == -2  # popped: nothing left behind (its expiry was set with it)
    finally:
        await rpc.aclose()
        server.process.kill()
        server.process.wait()
