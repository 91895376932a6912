"""Sandbox tasks: load an execution by id, run it in an isolated child, store the outcome."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery import Task

from shared.cache.runs import invalidate_possible_writes
from shared.config import get_settings
from shared.errors import ErrorType, error_dict
from shared.executions.events import FINISHED, publish_event
from shared.executions.status import ExecutionStatus
from shared.executions.store import claim_execution, finish_execution, get_execution
from shared.queues import Queue, TaskName
from workers.sandbox import resources
from workers.sandbox.celery_app import app
from workers.sandbox.execute import run_claimed_execution

log = logging.getLogger(__name__)
_settings = get_settings()
WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"


@app.task(name=TaskName.SANDBOX_PING, ignore_result=False, queue=Queue.EXECUTIONS)
def sandbox_ping() -> str:
    """Round-trip check for the sandbox worker pool."""
    return "pong"


@app.task(
    name=TaskName.RUN_EXECUTION,
    bind=True,
    # Idempotent by the row's status (below), so a late ack is safe: a message whose
    # worker died is redelivered and ends the execution as `worker_lost`.
    acks_late=True,
    reject_on_worker_lost=True,
    # No autoretry: tool calls may have side effects, executions run at most once.
    time_limit=_settings.task_hard_time_limit_s,
    soft_time_limit=_settings.task_hard_time_limit_s - 10,
)
def run_execution(self: Task, execution_id: str) -> str:
    """Run one queued execution; a redelivery of a finished or orphaned one changes nothing else."""
    pool = resources.db_pool()
    with pool.connection() as conn:
        row = claim_execution(conn, execution_id=execution_id, worker=WORKER_NAME)
        conn.commit()
        if row is None:
            return _handle_unclaimable(conn, execution_id)
    status = resources.event_loop().run_until_complete(
        run_claimed_execution(row=row, settings=_settings)
    )
    app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
    return status


def _handle_unclaimable(conn: Any, execution_id: str) -> str:
    """The row is not queued: finished already (no-op), or orphaned by a dead worker."""
    current = get_execution(conn, execution_id=execution_id)
    if current is None:
        log.warning("execution %s does not exist; message dropped", execution_id)
        return "missing"
    if current["status"] != ExecutionStatus.RUNNING:
        log.info("execution %s already %s; redelivery ignored", execution_id, current["status"])
        return str(current["status"])
    # Running but we just received its message again: the worker that held it died.
    # At most once: the code may have called tools with side effects, so never re-run,
    # and whatever it could have written is no longer served from the cache.
    invalidate_possible_writes(conn, resources.redis_client(), row=current)
    finished = finish_execution(
        conn,
        execution_id=execution_id,
        status=ExecutionStatus.WORKER_LOST,
        error=error_dict(
            ErrorType.WORKER_LOST,
            "the sandbox worker running this execution died; it was not re-run "
            "because tool calls may have had side effects — submit it again if safe",
        ),
    )
    conn.commit()
    if finished is not None:
        publish_event(
            resources.redis_client(),
            execution_id=execution_id,
            event={"type": FINISHED, "status": ExecutionStatus.WORKER_LOST},
        )
        app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
    return ExecutionStatus.WORKER_LOST
