"""Hits and misses per level: per tenant (``GET /v1/cache/stats``) and cluster-wide (Prometheus)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import redis

from shared.cache.keys import stats_key
from shared.queues import METRICS_PREFIX


class Level(StrEnum):
    """Where a hit came from: the ``cache_hit`` of an execution response."""

    EXECUTION = "execution"  # L1: same normalized code, args and tool schemas
    CAPABILITY = "capability"  # L2: same capability and params
    INTENT = "intent"  # L3: a near-identical intent of a cached capability, same args


def record_lookup(pipe: redis.client.Pipeline, *, tenant_id: str, level: Level, hit: bool) -> None:
    """Count one lookup (tenant stats and the Prometheus counter) on the caller's pipeline,
    sent with the request's other counters and events in one round trip."""
    kind = "hits" if hit else "misses"
    pipe.hincrby(stats_key(tenant_id), f"{kind}:{level}", 1)
    pipe.hincrby(f"{METRICS_PREFIX}cache_{kind}_total", str(level), 1)


def tenant_stats(client: redis.Redis, *, tenant_id: str) -> dict[str, dict[str, Any]]:
    """Hits, misses and hit rate of each level for one tenant."""
    raw = client.hgetall(stats_key(tenant_id))
    counts = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
    out: dict[str, dict[str, Any]] = {}
    for level in Level:
        hits, misses = counts.get(f"hits:{level}", 0), counts.get(f"misses:{level}", 0)
        lookups = hits + misses
        out[level] = {
            "hits": hits,
            "misses": misses,
            "hit_rate": round(hits / lookups, 4) if lookups else None,
        }
    return out
