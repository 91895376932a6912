"""Cache invalidations reach the invalidated tenants' event streams (real Postgres and Redis)."""

from __future__ import annotations

import time

import redis

from shared.cache.invalidate import Trigger, invalidate
from shared.config import Settings
from shared.db import connect
from shared.events import bus
from shared.queues import tenant_events_channel


def test_a_manual_cache_clear_is_announced_to_its_tenant_only(settings: Settings) -> None:
    client = redis.Redis.from_url(settings.redis_url)
    mine, theirs = client.pubsub(), client.pubsub()
    mine.subscribe(tenant_events_channel("acme"))
    theirs.subscribe(tenant_events_channel("globex"))
    for sub in (mine, theirs):
        assert sub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    with connect(settings.database_url or "") as conn:
        assert invalidate(conn, client, trigger=Trigger.MANUAL, scope="all", tenant_id="acme") == 0
    deadline = time.monotonic() + 10
    message = None
    while message is None and time.monotonic() < deadline:
        message = mine.get_message(ignore_subscribe_messages=True, timeout=1)
    assert message is not None
    assert bus.decode(message["data"]) == (
        "cache.invalidated",
        {"trigger": "manual", "scope": "all", "count": 0},
    )
    assert theirs.get_message(ignore_subscribe_messages=True, timeout=1) is None
