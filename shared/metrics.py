"""Cluster-wide Prometheus metrics kept in Redis, so any worker process on any host can count.

Workers increment counters and histogram buckets in Redis; the gateway's `/metrics`
exports them with a custom collector. Prometheus' own multiprocess mode only spans
one host's processes, and Celery workers come and go.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Sequence
from typing import Any

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from shared.errors import ErrorType
from shared.queues import (
    MCP_SESSION_BYTES_GAUGE,
    MCP_SESSIONS_GAUGE,
    METRICS_PREFIX,
    Queue,
    mcp_replica_key,
)

COUNTERS = {
    "capabilities_learned_total": "Capabilities created from successful executions",
    "capabilities_updated_total": "Successful re-runs of known capability code",
    "capabilities_skipped_tool_failures_total": "Executions not saved because a tool call failed",
    "capabilities_pruned_total": "Emergent capabilities deleted by pruning",
    "capabilities_promoted_total": "Capabilities promoted (used >= 3 times, success rate > 0.7)",
    "traces_ingested_total": "Execution traces ingested by learning workers",
    "capabilities_searched_total": "Capability searches by intent",
    "capabilities_matched_total": "Capability searches that matched at least one capability",
    "capabilities_executed_total": "Capability runs requested (cache hits included)",
    "suggestions_generated_total": "Tools and capabilities suggested (search and after runs)",
    "suggestions_accepted_total": "Suggestions a later run used within the hour",
    "patterns_detected_total": "Ingested traces whose tool calls formed a pattern (graph edges)",
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
    "executions_finished_total": ("status", "Executions that reached a terminal state, by status"),
    "sandbox_limit_kills_total": ("kind", "Sandbox runs ended by a limit (memory, cpu, wall...)"),
    "capability_runs_total": ("result", "Ingested capability re-runs, by succeeded or failed"),
    "tool_vector_fits_total": (
        "result",
        "Tenant tool-vector consolidations, by shipped or kept (held-back score below the current)",
    ),
    "query_adapter_fits_total": (
        "result",
        "Tenant query-adapter consolidations, by shipped or kept (held-back score below the "
        "current, or too few held-back runs)",
    ),
    "direct_calls_total": ("server", "Direct MCP tool calls admitted (/mcp/servers), by server"),
    "policy_decisions_total": (
        "decision",
        "Policy decisions (docs/policy.md) on tool calls and submissions, by allow or deny",
    ),
    "approvals_total": (
        "outcome",
        "Tool calls paused for approval, by outcome: requested, executed (approved and run "
        "once), approval_denied, approval_timeout",
    ),
}
# Seconds; ingestion is milliseconds when the capability is known, ~10 ms with an embedding.
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "ingestion_latency_seconds": (
        "Time to ingest one trace",
        (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    ),
    # A sandbox run: ~50 ms to start the child, up to the 300 s wall-time ceiling.
    "execution_duration_seconds": (
        "Sandbox run time of one execution (start of the child to its end)",
        (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    ),
}
# Histograms with one label; each label value is its own hash, the values seen are a set.
LABELLED_HISTOGRAMS: dict[str, tuple[str, str, tuple[float, ...]]] = {
    # A local tool answers in ~1 ms over the RPC channel; a remote API in 100s of ms.
    "tool_call_latency_seconds": (
        "server",
        "Time the toolhost took to answer one tool call, by MCP server",
        (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    ),
}
# How often a process adds a label value it observes to its histogram's set of values.
LABELS_EVERY_S = 60.0
# Which limit ended a sandbox run, from its error type (a `timeout` status is "wall").
LIMIT_KINDS: dict[str, str] = {
    ErrorType.MEMORY_LIMIT: "memory",
    ErrorType.CPU_LIMIT: "cpu",
    ErrorType.OUTPUT_LIMIT: "output",
    ErrorType.TOOL_CALL_LIMIT: "tool_calls",
}


def limit_kind(*, status: str, error: dict[str, Any] | None) -> str | None:
    """Which sandbox limit ended a run, from its status and structured error; None when none did."""
    if status == "timeout":
        return "wall"
    kind = (error or {}).get("type")
    return LIMIT_KINDS.get(kind) if isinstance(kind, str) else None


def queue_run(pipe: Any, *, status: str, error: dict[str, Any] | None, seconds: float) -> None:
    """One sandbox run, queued on the caller's pipeline: its duration, and the limit that
    ended it if one did."""
    _queue_observation(pipe, "execution_duration_seconds", seconds, count=1)
    if kind := limit_kind(status=status, error=error):
        pipe.hincrby(METRICS_PREFIX + "sandbox_limit_kills_total", kind, 1)


def queue_ingested(pipe: Any, *, results: Sequence[Any], seconds: float) -> None:
    """What a batch of ingested runs taught (``IngestResult``s): how many, the capabilities
    learned, updated or skipped for failed tools, patterns, suggestions, how capability
    re-runs went, and the batch's latency for each; queued on the caller's pipeline."""
    outcomes = [r.outcome for r in results]
    for name, amount in (
        ("traces_ingested_total", len(results)),
        ("capabilities_learned_total", outcomes.count("learned")),
        ("capabilities_updated_total", outcomes.count("updated")),
        (
            "capabilities_skipped_tool_failures_total",
            sum(1 for r in results if r.verdict == "tool_failures"),
        ),
        ("patterns_detected_total", sum(1 for r in results if r.edges)),
        ("suggestions_generated_total", sum(r.suggested for r in results)),
        ("suggestions_accepted_total", sum(r.suggestions_used for r in results)),
    ):
        if amount:
            pipe.incrby(METRICS_PREFIX + name, amount)
    for r in results:
        if r.rerun_ok is not None:
            result = "succeeded" if r.rerun_ok else "failed"
            pipe.hincrby(METRICS_PREFIX + "capability_runs_total", result, 1)
    # Each run waited for the whole batch: that is its ingestion latency.
    _queue_observation(pipe, "ingestion_latency_seconds", seconds, count=len(results))


def count_search(client: redis.Redis, *, matched: bool) -> None:
    """One capability search, and whether it matched anything (one round trip)."""
    pipe = client.pipeline(transaction=False)
    pipe.incr(METRICS_PREFIX + "capabilities_searched_total")
    if matched:
        pipe.incr(METRICS_PREFIX + "capabilities_matched_total")
    pipe.execute()


def count_finished(pipe: Any, *, status: str) -> None:
    """Queue one terminal execution on a pipeline (the one that announces its end)."""
    pipe.hincrby(METRICS_PREFIX + "executions_finished_total", status, 1)


def incr(client: redis.Redis, name: str, amount: int = 1) -> None:
    """Add to a counter."""
    assert name in COUNTERS, name
    client.incrby(METRICS_PREFIX + name, amount)


def incr_labelled(client: redis.Redis, name: str, label: str, amount: int = 1) -> None:
    """Add to one label's value of a labelled counter."""
    assert name in LABELLED_COUNTERS, name
    client.hincrby(METRICS_PREFIX + name, label, amount)


def labelled_incr_command(
    name: str, label: str, amount: int = 1
) -> tuple[str | bytes | int | float, ...]:
    """The Redis command adding to one label of a labelled counter, for a caller that sends
    it on a round trip of its own."""
    assert name in LABELLED_COUNTERS, name
    return ("HINCRBY", METRICS_PREFIX + name, label, amount)


def set_gauge(client: redis.Redis, name: str, value: float) -> None:
    """Set a gauge."""
    assert name in GAUGES, name
    client.set(METRICS_PREFIX + name, value)


def observe(client: redis.Redis, name: str, value: float, *, count: int = 1) -> None:
    """Record ``count`` observations of ``value`` in a histogram (bucket counts + sum, one
    round trip)."""
    pipe = client.pipeline(transaction=False)
    _queue_observation(pipe, name, value, count=count)
    pipe.execute()


def observation_commands(
    name: str,
    value: float,
    *,
    count: int = 1,
    label: str | None = None,
    labels: LabelsSent | None = None,
) -> list[tuple[str | bytes | int | float, ...]]:
    """The Redis commands that record ``count`` observations of ``value`` in a histogram
    (``label``: one label value of a labelled one), for a caller that sends them on a
    round trip of its own (the toolhost's RPC reply). ``labels``: the caller's record of
    the label values it added to the histogram's set lately (then added once a while)."""
    if label is None:
        _, buckets = HISTOGRAMS[name]
        key = METRICS_PREFIX + name
        commands: list[tuple[str | bytes | int | float, ...]] = []
    else:
        _, _, buckets = LABELLED_HISTOGRAMS[name]
        key = f"{METRICS_PREFIX}{name}:{label}"
        commands = []
        if labels is None or labels.due(name, label):
            commands.append(("SADD", f"{METRICS_PREFIX}{name}:labels", label))
    index = bisect.bisect_left(buckets, value)
    bucket = str(buckets[index]) if index < len(buckets) else "+Inf"
    commands.append(("HINCRBY", key, bucket, count))
    commands.append(("HINCRBYFLOAT", key, "sum", value * count))
    return commands


class LabelsSent:
    """The label values one process added to labelled histograms' sets, and when: a value is
    added again after ``every_s`` (so a set Redis lost, say a restart without persistence,
    is whole again within that), not on every observation (one command per tool call)."""

    def __init__(self, *, every_s: float = LABELS_EVERY_S) -> None:
        self._every_s = every_s
        self._sent: dict[tuple[str, str], float] = {}

    def due(self, name: str, label: str) -> bool:
        """Whether ``label`` of histogram ``name`` is to be added now (then noted as sent)."""
        now = time.monotonic()
        if now - self._sent.get((name, label), -self._every_s) < self._every_s:
            return False
        self._sent[(name, label)] = now
        return True


def _queue_observation(pipe: Any, name: str, value: float, *, count: int) -> None:
    for command in observation_commands(name, value, count=count):
        pipe.execute_command(*command)


def ratio(part: float, whole: float) -> float:
    """part / whole, 0 when nothing was counted yet (a rate gauge never reads NaN)."""
    return part / whole if whole else 0.0


class RedisMetricsCollector(Collector):
    """Reads every counter, gauge and histogram from Redis at scrape time."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def collect(self) -> Iterator[Any]:
        names = list(COUNTERS) + list(GAUGES)
        values = self.client.mget([METRICS_PREFIX + n for n in names])
        counts: dict[str, float] = {}
        for name, raw in zip(names, values, strict=True):
            value = float(raw or 0)
            if name in COUNTERS:
                counts[name] = value
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
            rate.add_metric(
                [level], ratio(hits.get(level, 0.0), hits.get(level, 0.0) + misses.get(level, 0.0))
            )
        yield rate
        yield from _rates(counts, labelled)
        yield self._queue_depths()
        yield from self._mcp_sessions()
        for name, (doc, buckets) in HISTOGRAMS.items():
            data = _decoded(self.client.hgetall(METRICS_PREFIX + name))
            yield _histogram(f"agentcards_{name}", doc, buckets, [((), data)])
        for name, (label, doc, buckets) in LABELLED_HISTOGRAMS.items():
            seen: list[str] = sorted(
                _text(v) for v in self.client.smembers(f"{METRICS_PREFIX}{name}:labels")
            )
            series = [
                ((v,), _decoded(self.client.hgetall(f"{METRICS_PREFIX}{name}:{v}"))) for v in seen
            ]
            yield _histogram(f"agentcards_{name}", doc, buckets, series, label=label)

    def _mcp_sessions(self) -> Iterator[GaugeMetricFamily]:
        """MCP sessions (2025-11-25) each live gateway replica owns, and the bytes Redis holds
        for them: each holds its transport in that replica's memory (at most
        AGENTCARDS_MCP_MAX_SESSIONS per endpoint) and its record, its last
        AGENTCARDS_MCP_SESSION_EVENTS events and what its client set in Redis."""
        sessions = GaugeMetricFamily(
            "agentcards_mcp_sessions",
            "MCP sessions each live gateway replica owns",
            labels=["replica"],
        )
        held = GaugeMetricFamily(
            "agentcards_mcp_session_redis_bytes",
            "Bytes Redis holds for the MCP sessions each live gateway replica owns",
            labels=["replica"],
        )
        owned = _decoded(self.client.hgetall(MCP_SESSIONS_GAUGE))
        sizes = _decoded(self.client.hgetall(MCP_SESSION_BYTES_GAUGE))
        pipe = self.client.pipeline(transaction=False)
        for replica in sorted(owned):
            pipe.exists(mcp_replica_key(replica))
        for replica, live in zip(sorted(owned), pipe.execute(), strict=True):
            if live:  # a replica that died says nothing more: its count goes with it
                sessions.add_metric([replica], owned[replica])
                held.add_metric([replica], sizes.get(replica, 0))
        yield sessions
        yield held

    def _queue_depths(self) -> GaugeMetricFamily:
        """Messages waiting in each Celery queue (a Redis list named after the queue)."""
        family = GaugeMetricFamily(
            "agentcards_queue_depth", "Messages waiting in each Celery queue", labels=["queue"]
        )
        pipe = self.client.pipeline(transaction=False)
        for queue in Queue:
            pipe.llen(queue.value)
        for queue, depth in zip(Queue, pipe.execute(), strict=True):
            family.add_metric([queue.value], float(depth))
        return family


def _rates(counts: dict[str, float], labelled: dict[str, dict[str, float]]) -> Iterator[Any]:
    """The learning loop's health as ratios, derived from their counters at scrape time:
    how often a capability search matches, how often a re-run capability succeeds, and how
    many detected patterns get promoted to capabilities."""
    runs = labelled["capability_runs_total"]
    for name, doc, value in (
        (
            "capabilities_match_rate",
            "Capability searches that matched / searches",
            ratio(counts["capabilities_matched_total"], counts["capabilities_searched_total"]),
        ),
        (
            "capabilities_success_rate",
            "Ingested capability re-runs that succeeded / re-runs",
            ratio(runs.get("succeeded", 0.0), sum(runs.values())),
        ),
        (
            "promotion_rate",
            "Capabilities promoted / patterns detected",
            ratio(counts["capabilities_promoted_total"], counts["patterns_detected_total"]),
        ),
    ):
        yield GaugeMetricFamily(f"agentcards_{name}", doc, value=value)


def _histogram(
    name: str,
    doc: str,
    buckets: tuple[float, ...],
    series: Sequence[tuple[tuple[str, ...], dict[str, float]]],
    *,
    label: str | None = None,
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=[label] if label else None)
    for label_values, data in series:
        cumulative = 0.0
        points = []
        for bound in [*map(str, buckets), "+Inf"]:
            cumulative += data.get(bound, 0.0)
            points.append((bound, cumulative))
        family.add_metric(list(label_values), points, sum_value=data.get("sum", 0.0))
    return family


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _decoded(raw_hash: Any) -> dict[str, float]:
    return {_text(k): float(v) for k, v in raw_hash.items()}
