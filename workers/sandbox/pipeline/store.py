"""Store the terminal state: the run's outcome, or (after a stage failed) a broken run's end."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from celery.exceptions import SoftTimeLimitExceeded

from shared.auth.audit import FINISH_AUDIT_SQL, finish_audit_params
from shared.db import autocommit
from shared.errors import ErrorType, error_dict
from shared.executions.status import ExecutionStatus
from shared.executions.store import FINISH_SQL, finish_execution, finish_params
from shared.sandbox.outcome import ExecutionOutcome
from workers.sandbox.pipeline.announce import announce_end
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import DatabaseDown, with_db_retry

log = logging.getLogger(__name__)


def store(ctx: RunContext) -> None:
    """Write the outcome (and end the audit row) in one transaction; ``ctx.status`` is the
    status stored, which a result Postgres cannot hold turns into `failed`."""
    assert ctx.outcome is not None
    ctx.status, ctx.stored_row = store_outcome(execution_id=ctx.execution_id, outcome=ctx.outcome)
    log.info("execution %s %s in %.0f ms", ctx.execution_id, ctx.status, ctx.outcome.duration_ms)


def store_outcome(
    *, execution_id: str, outcome: ExecutionOutcome
) -> tuple[str, dict[str, Any] | None]:
    """Write the terminal state; a result Postgres cannot hold (NaN, say) becomes an error.
    Returns the status stored and the row as stored (None if it was no longer `running`)."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "result": outcome.result,
        "error": outcome.error,
        "stdout": outcome.stdout,
        "stdout_truncated": outcome.stdout_truncated,
        "trace": outcome.trace,
        "duration_ms": outcome.duration_ms,
    }

    def write(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, Any] | None:
        # One statement in autocommit: the row and its audit row end together, in one round
        # trip (no BEGIN, no COMMIT), as atomic as the transaction it replaces.
        with autocommit(conn):
            try:
                return conn.execute(
                    END_SQL, end_params(execution_id, fields, outcome.trace)
                ).fetchone()
            except (psycopg.DataError, ValueError) as exc:  # NaN; ints past 4300 digits
                fields.update(
                    status=ExecutionStatus.FAILED,
                    result=None,
                    error=error_dict(
                        ErrorType.OUTPUT_LIMIT, f"result cannot be stored as JSON: {exc}"
                    ),
                )
                return conn.execute(
                    END_SQL, end_params(execution_id, fields, outcome.trace)
                ).fetchone()

    # Postgres down or restarting: the outcome waits here rather than being lost.
    row = with_db_retry(write, what="store")
    return str(fields["status"]), row


# The execution's terminal UPDATE and, in the same statement, its audit row's; it returns
# the row as stored (the announce carries it to the waiting gateway: shared/executions/carried.py).
END_SQL = (
    f"WITH finished AS ({FINISH_SQL} RETURNING *), audited AS ({FINISH_AUDIT_SQL}) "
    "SELECT * FROM finished"
)


def end_params(
    execution_id: str, fields: dict[str, Any], trace: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """``END_SQL``'s parameters: the outcome's ``fields``, the audit row's status and tools."""
    return {
        **finish_params(execution_id, fields),
        **finish_audit_params(fields["status"], trace),
    }


def end_broken(ctx: RunContext) -> None:
    """A stage raised between the claim and the store: the row must not stay `running`.
    If even this store fails, the reaper is the backstop."""
    assert ctx.failure is not None
    status, error = broken_end(ctx.failure)
    ctx.status = status

    def write(conn: Any) -> None:
        finish_execution(conn, execution_id=ctx.execution_id, status=status, error=error)
        conn.commit()

    try:
        with_db_retry(write, what="store")
    except DatabaseDown:
        log.error("execution %s: outcome not stored; the reaper will end it", ctx.execution_id)
        return
    announce_end(ctx.redis, ctx.execution_id, status)


def broken_end(failure: Exception) -> tuple[ExecutionStatus, dict[str, Any]]:
    """The terminal status and error of a run a stage broke: the task's time limit is a
    `timeout`; anything else (the invalidation of its writes too) `failed`."""
    if isinstance(failure, SoftTimeLimitExceeded):
        return ExecutionStatus.TIMEOUT, error_dict(
            ErrorType.TIMEOUT, "the worker's time limit for the task passed"
        )
    kind = ErrorType.STORE_FAILED if isinstance(failure, DatabaseDown) else ErrorType.INTERNAL_ERROR
    return ExecutionStatus.FAILED, error_dict(
        kind,
        f"the sandbox worker failed to complete it ({type(failure).__name__}: {failure}); "
        "tool calls it made are not undone",
    )
