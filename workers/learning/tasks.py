"""Learning tasks: thin wrappers that load by id, call pure functions in `shared`, and store."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from shared import metrics
from shared.config import get_settings
from shared.executions.events import LEARNED, publish_event
from shared.learning.graph_store import graph_fingerprint, refresh_metrics
from shared.learning.ingest import ingest_execution as ingest
from shared.learning.maintenance import promote_capabilities, prune_idle_capabilities
from shared.queues import GRAPH_FINGERPRINT_KEY, TaskName
from workers.learning import resources
from workers.learning.celery_app import app

log = logging.getLogger(__name__)


@app.task(name=TaskName.PING, ignore_result=False)
def ping() -> str:
    """Round-trip check used by `agentcards status` and the e2e benchmark baseline."""
    return "pong"


@app.task(
    name=TaskName.INGEST_EXECUTION,
    # Idempotent (executions.learned_at is set in the same transaction), so a message
    # whose worker died is redelivered and applied exactly once.
    acks_late=True,
    reject_on_worker_lost=True,
    # Only connection-level failures are worth retrying; bad data would fail again.
    autoretry_for=(psycopg.OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def ingest_execution(execution_id: str) -> str:
    """Turn one finished execution into graph edges and (maybe) a capability."""
    started = time.perf_counter()
    with resources.db_pool().connection() as conn:
        result = ingest(conn, execution_id=execution_id, embedder=resources.embedder())
        conn.commit()
    client = resources.redis_client()
    if result.outcome in {"missing", "already_ingested", "not_finished"}:
        return result.outcome
    metrics.incr(client, "traces_ingested_total")
    if result.outcome == "learned":
        metrics.incr(client, "capabilities_learned_total")
    elif result.outcome == "updated":
        metrics.incr(client, "capabilities_updated_total")
    if result.verdict == "tool_failures":
        metrics.incr(client, "capabilities_skipped_tool_failures_total")
    metrics.observe(client, "ingestion_latency_seconds", time.perf_counter() - started)
    event: dict[str, Any] = {"type": LEARNED, "outcome": result.outcome}
    if result.failed_tools:
        event["failed_tools"] = result.failed_tools
    publish_event(client, execution_id=execution_id, event=event)
    return result.outcome


@app.task(
    name=TaskName.REFRESH_GRAPH_METRICS,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=False,
)
def refresh_graph_metrics(force: bool = False) -> dict[str, Any]:
    """PageRank + Louvain over the whole graph; skipped cheaply when no edge changed."""
    client = resources.redis_client()
    with resources.db_pool().connection() as conn:
        fingerprint = graph_fingerprint(conn)
        if not force and client.get(GRAPH_FINGERPRINT_KEY) == fingerprint.encode():
            return {"skipped": True, "fingerprint": fingerprint}
        started = time.perf_counter()
        result = refresh_metrics(conn)
        conn.commit()
    client.set(GRAPH_FINGERPRINT_KEY, fingerprint)
    metrics.set_gauge(client, "graph_nodes", result.nodes)
    metrics.set_gauge(client, "graph_edges", result.edges)
    return {
        "skipped": False,
        "nodes": result.nodes,
        "edges": result.edges,
        "communities": len(set(result.community.values())),
        "seconds": round(time.perf_counter() - started, 3),
    }


@app.task(name=TaskName.PROMOTE_PATTERNS, acks_late=True, reject_on_worker_lost=True)
def promote_patterns() -> int:
    """Mark capabilities used ≥ 3 times with success rate > 0.7 as promoted."""
    with resources.db_pool().connection() as conn:
        promoted = promote_capabilities(conn)
        conn.commit()
    if promoted:
        metrics.incr(resources.redis_client(), "capabilities_promoted_total", promoted)
    return promoted


@app.task(name=TaskName.PRUNE_CAPABILITIES, acks_late=True, reject_on_worker_lost=True)
def prune_capabilities(dry_run: bool = False) -> dict[str, Any]:
    """Delete emergent capabilities used once and idle 30 days (off unless enabled)."""
    if not get_settings().pruning_enabled and not dry_run:
        return {"enabled": False, "deleted": 0}
    with resources.db_pool().connection() as conn:
        count = prune_idle_capabilities(conn, dry_run=dry_run)
        conn.commit()
    if not dry_run and count:
        metrics.incr(resources.redis_client(), "capabilities_pruned_total", count)
    return {
        "enabled": True,
        "dry_run": dry_run,
        "deleted" if not dry_run else "would_delete": count,
    }
