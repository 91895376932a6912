"""Learning tasks: thin wrappers that load by id, call pure functions in `shared`, and store."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import redis
from celery_batches import SimpleRequest

from shared import metrics, telemetry
from shared.cache.invalidate import Trigger, invalidate
from shared.cache.runs import invalidate_servers
from shared.cache.store import blocked_servers
from shared.config import get_settings
from shared.events import bus
from shared.executions.events import LEARNED, queue_events
from shared.graph.store import graph_fingerprint, refresh_metrics
from shared.learning.consolidate import (
    SOON_BURST_CAP_S,
    SOON_MIN_S,
    last_pass_seconds,
    soon_delay,
    soon_wait,
)
from shared.learning.ingest import NOTHING_DONE, IngestResult, ingest_executions, tenants_taught
from shared.learning.maintenance import promote_capabilities, prune_idle_capabilities
from shared.queues import (
    CONSOLIDATION_QUEUED_PREFIX,
    CONSOLIDATION_TAUGHT_PREFIX,
    GRAPH_FINGERPRINT_KEY,
    TaskName,
)
from shared.search.graph_snapshot import fold_ended_writers
from workers.learning import clients, consolidator
from workers.learning.batching import REQUEUE, ReliableBatches
from workers.learning.celery_app import app

log = logging.getLogger(__name__)
_settings = get_settings()
# Pause before handing back a batch the database could not take, so a requeued
# message does not spin while it is away.
REQUEUE_BACKOFF_S = 1.0
# How long the ingestion of runs nobody waits to see learned (``INGEST_EXECUTION_LATER``) holds
# a batch: at a few runs a second, one batch's fixed round trips (its transaction, its Redis
# pipeline, its hand-over to the pool) for them all instead of each; the graph's edges of a
# run lag it by a second at most, as a direct call's do (shared/direct/drain.py).
LATER_WAIT_S = 1.0


@app.task(name=TaskName.PING, ignore_result=False)
def ping() -> str:
    """Round-trip check used by `agentcards status` and the e2e benchmark baseline."""
    return "pong"


def linked_to_runs(
    func: Callable[[list[SimpleRequest]], str | None],
) -> Callable[[list[SimpleRequest]], str | None]:
    """A batch's ingestion as one span linked to each execution's trace: every message
    carries the W3C context of the run that sent it (Celery headers, shared.telemetry)."""

    @functools.wraps(func)
    def inner(requests: list[SimpleRequest]) -> str | None:
        if not telemetry.enabled():
            return func(requests)
        links = [link for r in requests if (link := telemetry.link_to(_carrier(r)))]
        attributes = {"agentcards.batch.size": len(requests)}
        with telemetry.span("learning.ingest", attributes=attributes, links=links):
            return func(requests)

    return inner


def _carrier(request: SimpleRequest) -> dict[str, Any]:
    """The message headers that may hold ``traceparent`` (top level, or Celery's ``headers``)."""
    sent = request.request_dict or {}
    return sent if "traceparent" in sent else dict(sent.get("headers") or {})


@app.task(
    name=TaskName.INGEST_EXECUTION,
    base=ReliableBatches,
    # Buffered messages go to one pool process as a list: when this many arrived, or
    # this long after the first. The worker's prefetch covers a full batch (celery_app).
    flush_every=_settings.learning_batch_size,
    flush_interval=_settings.learning_batch_wait_ms / 1000,
)
@linked_to_runs
def ingest_execution(requests: list[SimpleRequest]) -> str | None:
    """Turn finished executions (a message each, ``[execution_id]``, or one for several: a
    drained batch of direct calls) into graph and capabilities.

    Idempotent (executions.learned_at is set in the same transaction), so a batch
    whose worker died is redelivered and applied exactly once. A database that is
    away requeues the batch; a batch that fails on its data is retried one
    execution at a time, so one bad row cannot hold back the others.
    """
    return _ingest_batch(requests)


@app.task(
    name=TaskName.INGEST_EXECUTION_LATER,
    base=ReliableBatches,
    flush_every=_settings.learning_batch_size,
    flush_interval=LATER_WAIT_S,
)
@linked_to_runs
def ingest_execution_later(requests: list[SimpleRequest]) -> str | None:
    """``ingest_execution`` of runs nobody waits to see learned (no intent), a batch a second.
    Sandbox workers now hold such runs themselves and send them to ``ingest_execution``
    together (``workers/sandbox/pipeline/learn.py``); this stays for the messages of workers
    of the previous version still in the queue."""
    return _ingest_batch(requests)


def _ingest_batch(requests: list[SimpleRequest]) -> str | None:
    started = time.perf_counter()
    ids = [execution_id for r in requests for execution_id in _execution_ids(r)]
    try:
        results = _ingest([i for i in ids if i is not None])
    except psycopg.OperationalError:
        log.warning("database unavailable; requeueing %d ingestion(s)", len(ids), exc_info=True)
        time.sleep(REQUEUE_BACKOFF_S)  # a requeued message comes straight back
        return REQUEUE
    except Exception:
        log.exception("batch of %d ingestion(s) failed; retrying one at a time", len(ids))
        results = {}
        for execution_id in ids:
            if execution_id is None:
                continue
            try:
                results.update(_ingest([execution_id]))
            except Exception:
                log.exception("ingestion of execution %s failed", execution_id)
    _report(results, seconds=time.perf_counter() - started)
    _consolidate_soon(results)
    log.info("ingested a batch of %d in %.1f ms", len(ids), (time.perf_counter() - started) * 1000)
    return None


def _execution_ids(request: SimpleRequest) -> list[str | None]:
    """The message's execution ids (None for each that is not one). Sent as
    ``args=[execution_id, ...]``; a keyword call (one id) is accepted too."""
    values = list(request.args or []) or [(request.kwargs or {}).get("execution_id")]
    ids: list[str | None] = []
    for value in values:
        try:
            ids.append(str(uuid.UUID(str(value))))
        except ValueError:
            log.error("ingest_execution message %s has no execution id: %r", request.id, value)
            ids.append(None)
    return ids


def _ingest(ids: list[str]) -> dict[str, IngestResult]:
    if not ids:
        return {}
    with clients.db_pool().connection() as conn:
        results = ingest_executions(conn, execution_ids=ids, embedder=clients.embedder())
        conn.commit()
    return results


def _report(results: dict[str, IngestResult], *, seconds: float) -> None:
    """Metrics for the batch, the `learned` event of each run with an intent (a waiting response
    waits on it: ``services/gateway/ops/wait.py``; nobody waits for a run without one, a direct
    call's answer included) and the tenants' events, in one round trip."""
    done = {i: r for i, r in results.items() if r.outcome not in NOTHING_DONE}
    if not done:
        return
    events = []
    for execution_id, result in done.items():
        if not result.awaited:
            continue
        event: dict[str, Any] = {"type": LEARNED, "outcome": result.outcome}
        if result.failed_tools:
            event["failed_tools"] = result.failed_tools
        events.append((execution_id, event))
    pipe = clients.redis_client().pipeline(transaction=False)
    queue_events(pipe, events=events)
    metrics.queue_ingested(pipe, results=list(done.values()), seconds=seconds)
    for tenant_id, type_, data in _tenant_events(done):
        bus.queue(pipe, tenant_id=tenant_id, type=type_, data=data)
    try:
        pipe.execute()
    except redis.RedisError:
        # The runs are ingested (committed); a waiting response reads its row after its grace.
        log.warning("could not report %d ingested run(s)", len(done), exc_info=True)


def _consolidate_soon(results: dict[str, IngestResult]) -> None:
    """Queue a consolidation pass of each tenant the batch taught, unless one is queued
    (``consolidate.soon_delay`` after now); the beat's pass stays the backstop."""
    tenants = tenants_taught(results)
    if not tenants:
        return
    try:
        with clients.db_pool().connection() as conn:
            delays = {t: soon_delay(last_pass_seconds(conn, tenant_id=t)) for t in tenants}
        client = clients.redis_client()
        now = time.time()
        pipe = client.pipeline(transaction=False)
        for tenant in delays:  # a queued pass waits for the tenant's runs to pause
            pipe.set(CONSOLIDATION_TAUGHT_PREFIX + tenant, repr(now), ex=int(SOON_BURST_CAP_S) + 60)
        pipe.execute()
        for tenant, delay in delays.items():
            # Expires a minute after the pass is due at the latest: a pass lost with its worker
            # does not keep the tenant's next runs from queueing another.
            ex = int(delay + SOON_BURST_CAP_S) + 60
            if client.set(CONSOLIDATION_QUEUED_PREFIX + tenant, "1", nx=True, ex=ex):
                consolidate_tenant_soon.apply_async(args=[tenant, now + delay], countdown=delay)
    except (psycopg.Error, redis.RedisError):
        # The runs are ingested; the beat's pass consolidates them.
        log.warning("could not queue a consolidation of %s", tenants, exc_info=True)


def _tenant_events(
    done: dict[str, IngestResult],
) -> list[tuple[str, bus.EventType, dict[str, Any]]]:
    """The batch on the tenants' streams: each capability learned or updated once (a re-run
    updates its stats), each moved threshold once."""
    kinds = {"learned": bus.EventType.CAPABILITY_LEARNED}
    capabilities: dict[str, tuple[str, bus.EventType, dict[str, Any]]] = {}
    thresholds: dict[str, tuple[float, float]] = {}
    for result in done.values():
        if result.tenant_id is None:
            continue
        if result.capability is not None:
            kind = kinds.get(result.outcome, bus.EventType.CAPABILITY_UPDATED)
            data = bus.capability_event(result.capability)
            known = capabilities.get(data["capability_id"])
            if known is None or known[1] is not bus.EventType.CAPABILITY_LEARNED:
                capabilities[data["capability_id"]] = (result.tenant_id, kind, data)
        if result.threshold_change is not None:
            thresholds[result.tenant_id] = result.threshold_change
    return [
        *capabilities.values(),
        *(
            (tenant, bus.EventType.THRESHOLD_CHANGED, {"old": old, "new": new})
            for tenant, (old, new) in thresholds.items()
        ),
    ]


@app.task(
    name=TaskName.REFRESH_GRAPH_METRICS,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=False,
)
def refresh_graph_metrics(force: bool = False) -> dict[str, Any]:
    """PageRank + Louvain over the whole graph; skipped cheaply when no edge changed."""
    client = clients.redis_client()
    with clients.db_pool().connection() as conn:
        fold_ended_writers(conn)  # housekeeping of the graph version, even when skipped
        conn.commit()
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


@app.task(name=TaskName.CONSOLIDATE_TOOL_VECTORS, acks_late=True, reject_on_worker_lost=True)
def consolidate_tool_vectors() -> dict[str, Any]:
    """Start a pass over every tenant with new learned runs (tool vectors and query adapter,
    each version shipped only if it scores at least as well on the tenant's held-back runs)
    in a child process (``workers.learning.consolidator``), and return at once. Idempotent:
    a tenant with nothing new is left alone; with a pass still running, the next beat's
    pass takes what it left."""
    pid = consolidator.start()
    return {"started": pid is not None, "pid": pid or consolidator.running()}


@app.task(name=TaskName.CONSOLIDATE_TENANT, acks_late=True, reject_on_worker_lost=True)
def consolidate_tenant_soon(tenant_id: str, due_at: float | None = None) -> dict[str, Any]:
    """One tenant's pass, queued soon after its new runs (``_consolidate_soon``), started in
    a child process as the beat's is. While the tenant's runs still arrive it waits for them
    to pause (``soon_wait``: one pass reads the whole burst); while this worker's previous
    pass runs, it is queued again ``SOON_MIN_S`` later. Idempotent: a tenant with nothing
    new is left alone."""
    if due_at is not None:
        raw = clients.redis_client().get(CONSOLIDATION_TAUGHT_PREFIX + tenant_id)
        taught = float(raw) if raw is not None else None
        wait = soon_wait(now=time.time(), due_at=due_at, last_taught=taught)
        if wait > 0:
            consolidate_tenant_soon.apply_async(args=[tenant_id, due_at], countdown=wait)
            return {"started": False, "waits": wait}
    pid = consolidator.start([tenant_id])
    if pid is None:
        consolidate_tenant_soon.apply_async(args=[tenant_id], countdown=SOON_MIN_S)
        return {"started": False}
    # Runs ingested from now on queue the next pass: the child reads the tenant's runs
    # after this (it has yet to import and connect).
    clients.redis_client().delete(CONSOLIDATION_QUEUED_PREFIX + tenant_id)
    return {"started": True, "pid": pid}


@app.task(name=TaskName.PROMOTE_PATTERNS, acks_late=True, reject_on_worker_lost=True)
def promote_patterns() -> int:
    """Mark capabilities used ≥ 3 times with success rate > 0.7 as promoted."""
    with clients.db_pool().connection() as conn:
        promoted = promote_capabilities(conn)
        conn.commit()
    if promoted:
        metrics.incr(clients.redis_client(), "capabilities_promoted_total", promoted)
    return promoted


@app.task(name=TaskName.PRUNE_CAPABILITIES, acks_late=True, reject_on_worker_lost=True)
def prune_capabilities(dry_run: bool = False) -> dict[str, Any]:
    """Delete emergent capabilities used once and idle 30 days (off unless enabled)."""
    if not get_settings().pruning_enabled and not dry_run:
        return {"enabled": False, "deleted": 0}
    with clients.db_pool().connection() as conn:
        count = prune_idle_capabilities(conn, dry_run=dry_run)
        conn.commit()
    if not dry_run and count:
        metrics.incr(clients.redis_client(), "capabilities_pruned_total", count)
    return {
        "enabled": True,
        "dry_run": dry_run,
        "deleted" if not dry_run else "would_delete": count,
    }


@app.task(name=TaskName.EXPIRE_CACHE, acks_late=True, reject_on_worker_lost=True)
def expire_cache() -> int:
    """Delete expired capability-cache rows, logged per tenant, and retry the invalidations owed
    to blocked servers (idempotent: a re-run finds none)."""
    client = clients.redis_client()
    with clients.db_pool().connection() as conn:
        expired = invalidate(conn, client, trigger=Trigger.TTL, scope="expired", expired=True)
        return expired + invalidate_servers(conn, client, servers=blocked_servers(conn))
