"""Two beats (a rollout's overlap, a second host): one sends the schedule, the other stands by
and takes over when the first dies, so no periodic job is ever sent twice."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import redis

from shared.config import Settings
from shared.queues import Queue, TaskName
from tests.harness import Proc, start_logged, wait_until
from tests.stack import settings_env

LEASE_S = 4.0


def _beat(name: str, settings: Settings, tmp_path: Path) -> Proc:
    argv = [
        sys.executable, "-m", "celery", "-A", "workers.learning.celery_app", "beat",
        "--loglevel", "INFO", "-s", str(tmp_path / f"{name}-schedule"),
    ]  # fmt: skip
    env = settings_env(settings) | {"AGENTCARDS_BEAT_LEASE_S": str(LEASE_S)}
    log = tmp_path / f"{name}.log"
    return Proc(name, start_logged(name, argv, log_path=log, env=env), log)


def _reaps_sent(client: redis.Redis) -> int:
    """Reaper messages waiting on the maintenance queue (no worker consumes it here)."""
    bodies = client.lrange(Queue.MAINTENANCE.value, 0, -1)
    return sum(json.loads(b)["headers"]["task"] == TaskName.REAP_EXECUTIONS for b in bodies)


def test_one_beat_sends_a_second_stands_by_and_takes_over_when_the_first_dies(
    settings: Settings, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(settings.redis_url or "")
    first = _beat("beat-a", settings, tmp_path)
    try:
        wait_until(lambda: "leading" in first.log(), what="beat-a leads", timeout_s=60, proc=first)
        second = _beat("beat-b", settings, tmp_path)
        try:
            wait_until(
                lambda: "standing by" in second.log(),
                what="beat-b waits",
                timeout_s=60,
                proc=second,
            )
            # The reaper is due every 5 s: two beats sending would put ~2 per 5 s on the queue.
            before, started = _reaps_sent(client), time.monotonic()
            time.sleep(16)
            sent = _reaps_sent(client) - before
            window = time.monotonic() - started
            assert 1 <= sent <= window / 5 + 1, f"{sent} reaper messages in {window:.0f} s"
            assert "leading" not in second.log()

            first.proc.send_signal(signal.SIGKILL)  # no clean hand-over: the lease runs out
            first.proc.wait(10)
            killed = time.monotonic()
            wait_until(
                lambda: "leading" in second.log(),
                what="beat-b takes over",
                timeout_s=30,
                proc=second,
            )
            assert time.monotonic() - killed <= LEASE_S + 5
            before = _reaps_sent(client)
            wait_until(lambda: _reaps_sent(client) > before, what="beat-b sends", timeout_s=20)
        finally:
            second.stop()
    finally:
        first.stop()
