"""A pool process's heartbeat on real Redis: the execution it runs (``busy``) is written by
the heartbeat thread, off the run's path, and the key the reaper checks lives meanwhile."""

from __future__ import annotations

import pytest
import redis

from shared.executions.liveness import Heartbeat, alive, read_sandbox_beats, worker_name
from tests.stack import wait_until

pytestmark = pytest.mark.integration


def _busy(client: redis.Redis) -> list[str | None]:
    return [beat.busy for beat in read_sandbox_beats(client)]


def test_marking_a_run_shows_in_the_beat_and_the_worker_stays_alive(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    beat = Heartbeat(redis.Redis.from_url(redis_url)).start()
    assert _busy(client) == [None] and alive(client, [worker_name()]) == {worker_name()}

    beat.mark("e1")
    wait_until(lambda: _busy(client) == ["e1"], what="the beat names the running execution")
    assert alive(client, [worker_name()]) == {worker_name()}

    beat.mark(None)
    wait_until(lambda: _busy(client) == [None], what="the beat says the process is idle")
    assert alive(client, [worker_name()]) == {worker_name()}
