"""One beat sends the schedule, however many run: the one holding the leader lease in Redis.

A second beat (a rollout's overlap, a copy started by mistake, two hosts' `agentcards up`)
ticks too but sends nothing until the lease is free: it takes over within
``AGENTCARDS_BEAT_LEASE_S`` of the leader's death. The lease is renewed on every tick, and
a tick sends only after a renewal that proved the lease still ours (a compare-and-renew in
one Lua call), so a leader that stalled past its lease stops as soon as it wakes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import uuid
from typing import Any

import redis
from celery.beat import PersistentScheduler

from shared.clients import redis_client
from shared.config import get_settings
from shared.queues import BEAT_LEADER_KEY

log = logging.getLogger(__name__)

# Take the lease when free, or renew it when ours; 1 when we hold it afterwards.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LeaderScheduler(PersistentScheduler):
    """Celery's file-backed scheduler, sending only while this beat holds the lease."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s = get_settings().beat_lease_s
        self.leading: bool | None = None  # unknown until the first tick
        super().__init__(*args, **kwargs)

    def lead(self) -> bool:
        try:
            held = bool(
                redis_client().eval(
                    _ACQUIRE, 1, BEAT_LEADER_KEY, self.holder, int(self.lease_s * 1000)
                )
            )
        except redis.RedisError as exc:  # unknown: send nothing rather than send twice
            log.warning("beat lease unknown (Redis: %s); sending nothing this tick", exc)
            held = False
        if held != self.leading:
            log.info(
                "beat %s: %s",
                self.holder,
                "leading" if held else "standing by (another beat leads)",
            )
            self.leading = held
        return held

    def tick(self, *args: Any, **kwargs: Any) -> float:
        # Renew at least three times per lease, whatever the schedule's next due time.
        wake = self.lease_s / 3
        if not self.lead():
            return wake
        return min(super().tick(*args, **kwargs), wake)

    def close(self) -> None:
        if self.leading:  # a clean stop hands over at once, not after the lease runs out
            with contextlib.suppress(redis.RedisError):
                redis_client().eval(_RELEASE, 1, BEAT_LEADER_KEY, self.holder)
        super().close()


def check() -> int:
    """`--check` (a container's probe): 0 when Redis answers and some beat holds the lease."""
    try:
        holder = redis_client().get(BEAT_LEADER_KEY)
    except redis.RedisError as exc:
        print(f"beat: Redis unreachable: {exc}", file=sys.stderr)
        return 1
    if holder is None:
        print("beat: no beat holds the lease", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["--check"]:
    sys.exit(check())
