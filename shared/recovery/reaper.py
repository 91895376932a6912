"""Finish executions nobody will finish: their worker died, hung past the deadline, or never came.

Run by the beat (every few seconds) and by the gateway whenever it reads a queued or
running execution, so a client polling one never waits on a dead worker. Every reaped
execution ends once (``finish_execution`` only moves it from the state it was read in),
with an error saying why; nothing is re-run, since tool calls may have had side effects,
unless the client submitted it with ``"retry": "safe"`` and its worker is confirmed dead
(``shared.recovery.lost``): then it goes back to the queue and ``on_requeued`` sends it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg
import redis

from shared.cache.runs import invalidate_possible_writes
from shared.errors import ErrorType, error_dict
from shared.events import bus
from shared.executions.events import FINISHED, publish_events
from shared.executions.liveness import BEAT_TTL_S, LEASE_WORKER, alive
from shared.executions.status import ExecutionStatus
from shared.executions.store import finish_execution
from shared.queues import reap_suspect_key
from shared.recovery.lost import NOT_RERUN, end_lost_run, settle_ended

log = logging.getLogger(__name__)

Row = dict[str, Any]

# A live worker stores its outcome within seconds of the wall-time limit (the bridge
# kills the sandbox at the limit); this much later it is hung, or its result was lost.
RUN_GRACE_S = 60.0
# A missing heartbeat must be seen twice this far apart before the worker counts as dead:
# after a Redis restart every heartbeat is briefly missing until the next beat (1 s).
CONFIRM_S = float(BEAT_TTL_S)
# The suspicion mark outlives any pause between two reaper passes.
_SUSPECT_TTL_S = 120


def reap_stale(
    conn: psycopg.Connection[Row],
    client: redis.Redis,
    *,
    queue_max_s: float,
    max_retries: int,
    execution_id: str | None = None,
    on_finished: Callable[[str], None] | None = None,
    on_requeued: Callable[[str], None] | None = None,
) -> list[Row]:
    """Finish every stale queued/running execution (or just ``execution_id``); returns them.

    Commits its own changes. ``on_finished`` gets each reaped id (to enqueue ingestion),
    ``on_requeued`` each id sent back to the queue (to send its run again).
    """
    candidates = _candidates(conn, queue_max_s=queue_max_s, execution_id=execution_id)
    if not candidates:
        return []
    running = [r for r in candidates if r["status"] == ExecutionStatus.RUNNING]
    live = alive(client, sorted({r["worker"] for r in running if r["worker"]}))
    dead = _confirmed_dead(client, [r for r in running if r["worker"] not in live])
    reaped: list[Row] = []
    requeued: list[str] = []
    for row in candidates:
        if str(row["id"]) in dead:
            lost = end_lost_run(
                conn,
                client,
                row=row,
                reason=_lost_reason(str(row["worker"])),
                max_retries=max_retries,
            )
            if lost is not None and lost.requeued:
                requeued.append(str(row["id"]))
            elif lost is not None:
                reaped.append(lost.row)
            continue
        finished = _finish_one(conn, row)
        if finished is not None:
            reaped.append(finished)
            settle_ended(conn, row=finished)
            if finished["status"] == ExecutionStatus.WORKER_LOST:
                # Before it is announced: whatever the lost run wrote is not served stale.
                invalidate_possible_writes(conn, client, row=row)
    conn.commit()
    for execution_id in requeued:
        if on_requeued is not None:
            on_requeued(execution_id)
    if reaped:
        events = [(str(r["id"]), {"type": FINISHED, "status": r["status"]}) for r in reaped]
        try:
            publish_events(client, events=events)
        except redis.RedisError as exc:  # waiters also poll the row
            log.warning("could not announce %d reaped executions: %s", len(reaped), exc)
        bus.publish_many(
            client,
            events=[
                (r["tenant_id"], bus.EventType.EXECUTION_FINISHED, bus.execution_finished(r))
                for r in reaped
            ],
        )
        for row in reaped:
            log.warning("reaped execution %s: %s", row["id"], row["error"]["message"])
            if on_finished is not None:
                on_finished(str(row["id"]))
    return reaped


def _lost_reason(worker: str) -> str:
    """Why a running row whose worker (or lease) is gone ended."""
    if worker.startswith(LEASE_WORKER):  # a direct call made as an MCP task
        return (
            "the toolhost calling the tool's server stopped before the call ended (its "
            "lease lapsed); the tool may have run on its server"
        )
    return f"the sandbox worker running it ({worker}) died"


def _candidates(
    conn: psycopg.Connection[Row], *, queue_max_s: float, execution_id: str | None
) -> list[Row]:
    """Running rows started over a beat ago (their worker must be beating by now) and expired
    queued rows. A running row is overdue past its limit plus the grace plus the time its
    calls waited for approval (which the run's own clock does not count either)."""
    return conn.execute(
        """
        SELECT id, status, worker, timeout_s, tools, retry, attempts,
               status = 'running'
                 AND now() > started_at + make_interval(secs => timeout_s + %(grace)s)
                     + (SELECT coalesce(sum(least(coalesce(a.decided_at, now()), a.expires_at)
                                            - a.created_at), interval '0')
                          FROM approvals a WHERE a.execution_id = executions.id::text)
                 AS overdue
          FROM executions
         WHERE (%(id)s::uuid IS NULL OR id = %(id)s::uuid)
           AND ((status = 'running' AND started_at < now() - make_interval(secs => %(ttl)s))
             OR (status = 'queued'
                 AND coalesce(requeued_at, created_at) < now() - make_interval(secs => %(qmax)s)))
        """,
        {"grace": RUN_GRACE_S, "ttl": BEAT_TTL_S, "qmax": queue_max_s, "id": execution_id},
    ).fetchall()


def _confirmed_dead(client: redis.Redis, suspects: list[Row]) -> set[str]:
    """Execution ids whose worker was already missing ``CONFIRM_S`` ago (marks the rest)."""
    if not suspects:
        return set()
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for row in suspects:
        key = reap_suspect_key(str(row["id"]))
        pipe.set(key, now, nx=True, ex=_SUSPECT_TTL_S)
        pipe.get(key)
    replies = pipe.execute()
    marks = replies[1::2]
    return {
        str(row["id"])
        for row, mark in zip(suspects, marks, strict=True)
        if mark is not None and now - float(mark) >= CONFIRM_S
    }


def _finish_one(conn: psycopg.Connection[Row], row: Row) -> Row | None:
    """End an expired queued row, or an overdue running one whose worker still beats (hung)."""
    execution_id = str(row["id"])
    if row["status"] == ExecutionStatus.QUEUED:
        return finish_execution(
            conn,
            execution_id=execution_id,
            status=ExecutionStatus.TIMEOUT,
            error=error_dict(
                ErrorType.QUEUE_TIMEOUT,
                "no sandbox worker picked this execution up in time; it never ran — "
                "check `agentcards status` and submit it again",
            ),
            from_statuses=(ExecutionStatus.QUEUED,),
        )
    if not row["overdue"]:
        return None
    # Its worker still beats: it may still be running, so even "retry": "safe" is not re-run.
    message = (
        f"no result {RUN_GRACE_S:g}s past its {row['timeout_s']:g}s limit: sandbox worker "
        f"{row['worker']} hung or lost it; {NOT_RERUN}"
    )
    return finish_execution(
        conn,
        execution_id=execution_id,
        status=ExecutionStatus.WORKER_LOST,
        error=error_dict(ErrorType.WORKER_LOST, message),
    )
