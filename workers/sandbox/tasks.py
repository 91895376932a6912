"""Sandbox tasks: load an execution by id, run it in an isolated child, store the outcome."""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Task
from celery.exceptions import Reject, SoftTimeLimitExceeded

from shared.config import get_settings
from shared.errors import ErrorType, error_dict
from shared.executions.events import FINISHED, publish_event
from shared.executions.liveness import alive, worker_name
from shared.executions.status import ExecutionStatus
from shared.executions.store import claim_execution, finish_execution, get_execution
from shared.logs import bind
from shared.queues import Queue, TaskName
from shared.recovery.lost import end_lost_run
from workers.sandbox import resources
from workers.sandbox.celery_app import app
from workers.sandbox.execute import run_claimed_execution
from workers.sandbox.retry import DatabaseDown, with_db_retry

log = logging.getLogger(__name__)
_settings = get_settings()


@app.task(name=TaskName.SANDBOX_PING, ignore_result=False, queue=Queue.EXECUTIONS)
def sandbox_ping() -> str:
    """Round-trip check for the sandbox worker pool."""
    return "pong"


@app.task(
    name=TaskName.RUN_EXECUTION,
    bind=True,
    # Idempotent by the row's status (below), so a late ack is safe: a message whose
    # worker died is redelivered and changes nothing (the reaper ended it as `worker_lost`,
    # or re-queued it for a client that submitted it with `"retry": "safe"`).
    acks_late=True,
    reject_on_worker_lost=True,
    # No autoretry: tool calls may have side effects, executions run at most once.
    # Database errors before the claim are retried in place (nothing ran yet).
    time_limit=_settings.task_hard_time_limit_s,
    soft_time_limit=_settings.task_hard_time_limit_s - 10,
)
def run_execution(self: Task, execution_id: str) -> str:
    """Run one queued execution; a redelivery of a finished or orphaned one changes nothing else."""
    beat = resources.heartbeat()
    try:
        row = with_db_retry(lambda conn: _claim(conn, execution_id), what="claim")
    except DatabaseDown as exc:
        # Nothing ran: give the message back to the queue for a later delivery.
        raise Reject(f"database unavailable: {exc}", requeue=True) from exc
    if row is None:
        status = with_db_retry(lambda conn: _handle_unclaimable(conn, execution_id), what="read")
        if status != ExecutionStatus.QUEUED:
            return status
        # Its worker died and it may be re-run (`"retry": "safe"`): run it here, now.
        row = with_db_retry(lambda conn: _claim(conn, execution_id), what="claim")
        if row is None:  # another worker claimed it first
            return ExecutionStatus.RUNNING
    bind(tenant_id=row["tenant_id"])
    beat.busy = execution_id
    beat.beat()
    try:
        status = resources.event_loop().run_until_complete(
            run_claimed_execution(row=row, settings=_settings)
        )
    except SoftTimeLimitExceeded:
        status = _finish_broken(
            execution_id,
            ExecutionStatus.TIMEOUT,
            error_dict(ErrorType.TIMEOUT, "the worker's time limit for the task passed"),
        )
    except Exception as exc:
        # Whatever broke between the claim and the store, the row must not stay `running`.
        log.exception("execution %s failed in the worker", execution_id)
        status = _finish_broken(
            execution_id,
            ExecutionStatus.FAILED,
            error_dict(
                ErrorType.STORE_FAILED
                if isinstance(exc, DatabaseDown)
                else ErrorType.INTERNAL_ERROR,
                f"the sandbox worker failed to complete it ({type(exc).__name__}: {exc}); "
                "tool calls it made are not undone",
            ),
        )
    finally:
        beat.busy = None
        beat.beat()
    _enqueue_ingest(execution_id)
    return status


def _claim(conn: Any, execution_id: str) -> dict[str, Any] | None:
    row = claim_execution(conn, execution_id=execution_id, worker=worker_name())
    conn.commit()
    return row


def _finish_broken(execution_id: str, status: ExecutionStatus, error: dict[str, Any]) -> str:
    """Store a terminal state for a run that raised; the reaper is the backstop if this fails too."""

    def store(conn: Any) -> None:
        finish_execution(conn, execution_id=execution_id, status=status, error=error)
        conn.commit()

    try:
        with_db_retry(store, what="store")
    except DatabaseDown:
        log.error("execution %s: outcome not stored; the reaper will end it", execution_id)
        return status
    _announce(execution_id, status)
    return status


def _announce(execution_id: str, status: str) -> None:
    try:
        publish_event(
            resources.redis_client(),
            execution_id=execution_id,
            event={"type": FINISHED, "status": status},
        )
    except redis.RedisError as exc:  # waiting clients also poll the row
        log.warning("could not announce the end of %s: %s", execution_id, exc)


def _enqueue_ingest(execution_id: str) -> None:
    try:
        app.send_task(TaskName.INGEST_EXECUTION, args=[execution_id])
    except Exception as exc:  # kombu raises several connection errors; the row is stored
        log.error("could not enqueue ingestion of %s: %s", execution_id, exc)


def _handle_unclaimable(conn: Any, execution_id: str) -> str:
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
        holder_alive = bool(alive(resources.redis_client(), [holder]))
    except redis.RedisError:
        holder_alive = True  # cannot tell: leave it to the reaper rather than guess
    if holder_alive:
        log.info(
            "execution %s is running on live worker %s; duplicate ignored", execution_id, holder
        )
        return ExecutionStatus.RUNNING
    # Running, its worker silent, and we just received its message again: the worker died.
    # At most once unless the client allowed re-runs (shared.executions.lost decides).
    lost = end_lost_run(
        conn,
        resources.redis_client(),
        row=current,
        reason=f"the sandbox worker running it ({holder}) died",
        max_retries=_settings.execution_max_retries,
    )
    conn.commit()
    if lost is None:  # the reaper got there first
        return "reaped"
    if lost.requeued:
        return ExecutionStatus.QUEUED
    _announce(execution_id, ExecutionStatus.WORKER_LOST)
    _enqueue_ingest(execution_id)
    return ExecutionStatus.WORKER_LOST
