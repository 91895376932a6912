"""Cluster-wide Prometheus metrics kept in Redis, so any worker process on any host can count.

Workers increment counters and histogram buckets in Redis; the gateway's `/metrics`
exports them with a custom collector. Prometheus' own multiprocess mode only spans
one host's processes, and Celery workers come and go.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from shared.queues import METRICS_PREFIX

COUNTERS = {
    "capabilities_learned_total": "Capabilities created from successful executions",
    "capabilities_updated_total": "Successful re-runs of known capability code",
    "capabilities_skipped_tool_failures_total": "Executions not saved because a tool call failed",
    "capabilities_pruned_total": "Emergent capabilities deleted by pruning",
    "capabilities_promoted_total": "Capabilities promoted (used >= 3 times, success rate > 0.7)",
    "traces_ingested_total": "Execution traces ingested by learning workers",
    "executions_finished_total": "Executions that reached a terminal state",
}
GAUGES = {
    "graph_nodes": "Nodes in the tool graph at the last refresh",
    "graph_edges": "Edges in the tool graph at the last refresh",
}
# Counters with one label, kept as Redis hashes (field = label value).
LABELLED_COUNTERS = {
    "cache_hits_total": ("level", "Result cache hits by level (execution, capability, intent)"),
    "cache_misses_total": ("level", "Result cache lookups that found nothing, by level"),
    "cache_invalidations_total": ("trigger", "Result cache entries invalidated, by trigger"),
}
# Seconds; ingestion is milliseconds when the capability is known, ~10 ms with an embedding.
HISTOGRAMS = {
    "ingestion_latency_seconds": (
        "Time to ingest one trace",
        (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    ),
}


def incr(client: redis.Redis, name: str, amount: int = 1) -> None:
    """Add to a counter."""
    assert name in COUNTERS, name
    client.incrby(METRICS_PREFIX + name, amount)


def incr_labelled(client: redis.Redis, name: str, label: str, amount: int = 1) -> None:
    """Add to one label's value of a labelled counter."""
    assert name in LABELLED_COUNTERS, name
    client.hincrby(METRICS_PREFIX + name, label, amount)


def set_gauge(client: redis.Redis, name: str, value: float) -> None:
    """Set a gauge."""
    assert name in GAUGES, name
    client.set(METRICS_PREFIX + name, value)


def observe(client: redis.Redis, name: str, value: float, *, count: int = 1) -> None:
    """Record ``count`` observations of ``value`` in a histogram (bucket counts + sum, one
    round trip)."""
    _, buckets = HISTOGRAMS[name]
    index = bisect.bisect_left(buckets, value)
    bucket = str(buckets[index]) if index < len(buckets) else "+Inf"
    key = METRICS_PREFIX + name
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(key, bucket, count)
    pipe.hincrbyfloat(key, "sum", value * count)
    pipe.execute()


class RedisMetricsCollector(Collector):
    """Reads every counter, gauge and histogram from Redis at scrape time."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def collect(self) -> Iterator[Any]:
        names = list(COUNTERS) + list(GAUGES)
        values = self.client.mget([METRICS_PREFIX + n for n in names])
        for name, raw in zip(names, values, strict=True):
            value = float(raw or 0)
            if name in COUNTERS:
                yield CounterMetricFamily(
                    f"agentcards_{name.removesuffix('_total')}", COUNTERS[name], value=value
                )
            else:
                yield GaugeMetricFamily(f"agentcards_{name}", GAUGES[name], value=value)
        labelled = {}
        for name, (label, doc) in LABELLED_COUNTERS.items():
            labelled[name] = _decoded(self.client.hgetall(METRICS_PREFIX + name))
            family = CounterMetricFamily(
                f"agentcards_{name.removesuffix('_total')}", doc, labels=[label]
            )
            for label_value, count in sorted(labelled[name].items()):
                family.add_metric([label_value], count)
            yield family
        rate = GaugeMetricFamily(
            "agentcards_cache_hit_rate", "Result cache hits / lookups, by level", labels=["level"]
        )
        hits, misses = labelled["cache_hits_total"], labelled["cache_misses_total"]
        for level in sorted(set(hits) | set(misses)):
            lookups = hits.get(level, 0.0) + misses.get(level, 0.0)
            rate.add_metric([level], hits.get(level, 0.0) / lookups if lookups else 0.0)
        yield rate
        for name, (doc, buckets) in HISTOGRAMS.items():
            data = _decoded(self.client.hgetall(METRICS_PREFIX + name))
            cumulative = 0.0
            points = []
            for bound in [*map(str, buckets), "+Inf"]:
                cumulative += data.get(bound, 0.0)
                points.append((bound, cumulative))
            yield HistogramMetricFamily(
                f"agentcards_{name}", doc, buckets=points, sum_value=data.get("sum", 0.0)
            )


def _decoded(raw_hash: Any) -> dict[str, float]:
    return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw_hash.items()}
