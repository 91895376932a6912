"""``agentcards policy reload`` reaching every process that decides: a pub/sub message on
``POLICY_RELOAD_CHANNEL`` each of them follows (a process that misses one still sees the
changed file at its next look, within ``CHECK_EVERY_S``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis
import redis.asyncio as aioredis

from shared.errors import PolicyInvalid
from shared.policy.engine import PolicyEngine
from shared.queues import POLICY_RELOAD_CHANNEL

log = logging.getLogger(__name__)

RECONNECT_S = 1.0  # after the channel broke (Redis restarted): subscribe again this soon


async def follow_reloads(client: aioredis.Redis, engine: PolicyEngine) -> None:
    """Reload ``engine`` on each message until cancelled; never raises otherwise."""
    if not engine.configured:
        return
    while True:
        try:
            async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(POLICY_RELOAD_CHANNEL)
                async for _ in pubsub.listen():
                    with contextlib.suppress(PolicyInvalid):  # logged; the last good set stays
                        await asyncio.to_thread(engine.reload)
        except redis.RedisError as exc:
            log.warning("policy reload channel lost (%s); subscribing again", exc)
            await asyncio.sleep(RECONNECT_S)


def ask_reload(client: redis.Redis) -> int:
    """Tell every following process to reload now; how many heard it."""
    return int(client.publish(POLICY_RELOAD_CHANNEL, b"reload"))  # type: ignore[arg-type]
