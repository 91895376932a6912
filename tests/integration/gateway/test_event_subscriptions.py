"""Waiting on results under a burst: a follower that fails still gives its Redis connection back.

Every `?wait=true` request subscribes to its execution's events through the gateway's
async Redis pool, then reads the event log with a second connection. When the pool was
full, the subscription took the last connection and the log read failed; the follower's
exit never ran, so the subscription kept its connection for good. Each such request
leaked one, the pool stayed full, and every later wait answered 503 "too many
connections" while Redis was fine (found by `agentcards bench load` at 80 submissions/s).
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from redis.exceptions import MaxConnectionsError

from services.gateway.ops.execution_events import EventFollower
from services.gateway.state import GatewayState

pytestmark = pytest.mark.integration


async def test_a_follower_that_cannot_read_the_log_gives_its_connection_back(
    redis_url: str,
) -> None:
    client = aioredis.Redis.from_url(redis_url, max_connections=1)  # a full pool, in small
    state = cast(GatewayState, SimpleNamespace(aredis=client))
    try:
        for _ in range(3):
            with pytest.raises(MaxConnectionsError):  # subscribed, then no connection left
                async with EventFollower(state, execution_id=str(uuid.uuid4())):
                    pass
        pong: Any = await client.ping()  # MaxConnectionsError if the subscription kept it
        assert pong is True
    finally:
        await client.aclose()
