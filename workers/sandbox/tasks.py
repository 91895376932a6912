"""Sandbox tasks: claim an execution by id, then run it through the pipeline's stages."""

from __future__ import annotations

from celery import Task
from celery.exceptions import Reject

from shared.config import get_settings
from shared.executions.status import ExecutionStatus
from shared.logs import bind
from shared.queues import Queue, TaskName
from workers.sandbox import clients
from workers.sandbox.celery_app import app
from workers.sandbox.pipeline.claim import claim, handle_unclaimable
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.runner import run_pipeline
from workers.sandbox.pipeline.stages import STAGES
from workers.sandbox.pipeline.tracing import run_span, wrappers
from workers.sandbox.retry import DatabaseDown, with_db_retry

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
    beat = clients.heartbeat()
    try:
        row = with_db_retry(lambda conn: claim(conn, execution_id), what="claim")
    except DatabaseDown as exc:
        # Nothing ran: give the message back to the queue for a later delivery.
        raise Reject(f"database unavailable: {exc}", requeue=True) from exc
    if row is None:
        status = with_db_retry(
            lambda conn: handle_unclaimable(conn, execution_id, settings=_settings), what="read"
        )
        if status != ExecutionStatus.QUEUED:
            return status
        # Its worker died and it may be re-run (`"retry": "safe"`): run it here, now.
        row = with_db_retry(lambda conn: claim(conn, execution_id), what="claim")
        if row is None:  # another worker claimed it first
            return ExecutionStatus.RUNNING
    bind(tenant_id=row["tenant_id"])
    # From here on the row is ours: the stages end it whatever happens (runner.py).
    version = row.pop("tools_version", None)  # not a column: read by the claim beside the row
    ctx = RunContext(
        row=row, settings=_settings, redis=clients.redis_client(), tools_version=version
    )
    beat.mark(execution_id)  # written by the heartbeat thread: not on the run's path
    try:
        with run_span(ctx):
            run_pipeline(STAGES, ctx, wrappers=wrappers())
    finally:
        beat.mark(None)
    return str(ctx.status)
