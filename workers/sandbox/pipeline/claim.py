"""The gate in front of the stages: claim the row (`queued` → `running`), or tell why not.

Not a stage: before the claim the row is not ours, so a failure must not end it (the task
gives the message back to the queue instead), and a redelivered message may find a row
finished, running elsewhere or orphaned (``handle_unclaimable``).
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from shared.config import Settings
from shared.db import autocommit
from shared.dispatch import send_ingest
from shared.executions.liveness import alive, worker_name
from shared.executions.status import ExecutionStatus
from shared.executions.store import claim_execution, get_execution
from shared.recovery.lost import end_lost_run
from workers.sandbox import clients
from workers.sandbox.celery_app import app
from workers.sandbox.pipeline.announce import announce_end

log = logging.getLogger(__name__)


def claim(conn: Any, execution_id: str) -> dict[str, Any] | None:
    """The row, now `running` on this worker; None when it was not `queued`.

    One statement in autocommit: claimed and committed in one round trip (no BEGIN, no
    COMMIT), as atomic and as durable as in a transaction of its own."""
    with autocommit(conn):
        return claim_execution(conn, execution_id=execution_id, worker=worker_name())


def handle_unclaimable(conn: Any, execution_id: str, *, settings: Settings) -> str:
    """The row is not queued: finished already (no-op), running elsewhere, or orphaned."""
    current = get_execution(conn, execution_id=execution_id)
    if current is None:
        log.warning("execution %s does not exist; message dropped", execution_id)
        return "missing"
    if current["status"] != ExecutionStatus.RUNNING:
        log.info("execution %s already %s; redelivery ignored", execution_id, current["status"])
        return str(current["status"])
    holder = current["worker"] or ""
    try:
        holder_alive = bool(alive(clients.redis_client(), [holder]))
    except redis.RedisError:
        holder_alive = True  # cannot tell: leave it to the reaper rather than guess
    if holder_alive:
        log.info(
            "execution %s is running on live worker %s; duplicate ignored", execution_id, holder
        )
        return ExecutionStatus.RUNNING
    # Running, its worker silent, and we just received its message again: the worker died.
    # At most once unless the client allowed re-runs (shared.recovery.lost decides).
    lost = end_lost_run(
        conn,
        clients.redis_client(),
        row=current,
        reason=f"the sandbox worker running it ({holder}) died",
        max_retries=settings.execution_max_retries,
    )
    conn.commit()
    if lost is None:  # the reaper got there first
        return "reaped"
    if lost.requeued:
        return ExecutionStatus.QUEUED
    announce_end(clients.redis_client(), execution_id, ExecutionStatus.WORKER_LOST)
    send_ingest(app, execution_id)
    return ExecutionStatus.WORKER_LOST
