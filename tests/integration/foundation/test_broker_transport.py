"""kombu's Redis transport with one client per channel (shared/broker_transport.py), on a real
Redis: a run's message is published and taken as before, and the channel builds one redis-py
client for its commands, not one per command, until its pool is dropped."""

from __future__ import annotations

import pytest
import redis

from shared.broker import make_celery
from shared.broker_transport import Channel
from shared.config import Settings
from shared.dispatch import send_run
from shared.queues import Queue, TaskName

pytestmark = pytest.mark.integration


def _settings(redis_url: str) -> Settings:
    return Settings(database_url="postgresql://x@h/x", redis_url=redis_url)


def test_a_sent_run_is_taken_and_acknowledged_through_the_transport(redis_url: str) -> None:
    app = make_celery("test", settings=_settings(redis_url))
    try:
        send_run(app, "run-1")
        send_run(app, "run-2")
        with app.connection_for_read() as conn:
            assert isinstance(conn.default_channel, Channel)
            queue = conn.SimpleQueue(Queue.EXECUTIONS.value, no_ack=False)
            taken = [queue.get(timeout=5) for _ in range(2)]
            for message in taken:
                message.ack()  # the unacked bookkeeping and the ack go through the one client
            assert [(m.headers["task"], m.payload[0]) for m in taken] == [
                (TaskName.RUN_EXECUTION, ["run-1"]),
                (TaskName.RUN_EXECUTION, ["run-2"]),
            ]
            queue.close()
        client = redis.Redis.from_url(redis_url)
        assert client.llen(Queue.EXECUTIONS.value) == 0
        assert client.hlen("unacked") == 0  # acknowledged: nothing left to redeliver
    finally:
        app.close()


def test_the_channel_builds_one_client_per_pool(redis_url: str) -> None:
    app = make_celery("test", settings=_settings(redis_url))
    try:
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
                assert first is second and first.ping()
            given = redis.Redis.from_url(redis_url)
            with channel.conn_or_acquire(given) as client:
                assert client is given
            channel._pool = None  # what kombu does to a channel whose connection failed
            with channel.conn_or_acquire() as third:
                assert third is not first and third.connection_pool is channel.pool
                assert third.ping()
    finally:
        app.close()
