"""A run whose sandbox worker died: re-queue it (``"retry": "safe"``, retries left) or end it.

Both places that find a dead worker decide here: the reaper (beat and gateway reads) and
a redelivered message (``workers.sandbox.tasks``). Only a confirmed death is re-run; a
run that is merely overdue may still be running on a hung worker and is never re-run.
Nothing is ingested for a re-queued attempt, so learning still counts each execution once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import redis

from shared.approvals.store import close_run_approvals
from shared.auth.audit import finish_audit
from shared.auth.grants import GRANT_QUEUE_SLACK_S
from shared.cache.runs import invalidate_possible_writes
from shared.errors import ErrorType, error_dict
from shared.executions.events import RETRIED, publish_event
from shared.executions.status import ExecutionStatus
from shared.executions.store import finish_execution, requeue_execution
from shared.queues import grant_key, reap_suspect_key

log = logging.getLogger(__name__)

Row = dict[str, Any]

NOT_RERUN = (
    "it was not re-run because tool calls may have had side effects — submit it again if "
    'safe, or with "retry": "safe" to have it re-run'
)


@dataclass(frozen=True, slots=True)
class LostRun:
    """What became of a lost attempt: ``row`` as stored, and whether it went back to the queue."""

    row: Row
    requeued: bool


def may_rerun(row: Row, *, max_retries: int) -> bool:
    """The client allowed re-runs and this attempt was not the last one allowed."""
    return row.get("retry") == "safe" and int(row.get("attempts") or 0) <= max_retries


def end_lost_run(
    conn: psycopg.Connection[Row],
    client: redis.Redis,
    *,
    row: Row,
    reason: str,
    max_retries: int,
) -> LostRun | None:
    """Re-queue or finish (``worker_lost``) a running row whose worker died; None if someone
    else already did. The caller commits, then sends the run again when ``requeued``.

    Whatever the lost attempt may have written is no longer served from the result cache.
    """
    execution_id = str(row["id"])
    attempts = int(row.get("attempts") or 0)
    invalidate_possible_writes(conn, client, row=row)
    if may_rerun(row, max_retries=max_retries):
        record = {
            "attempt": attempts,
            "worker": row.get("worker"),
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
        }
        requeued = requeue_execution(
            conn, execution_id=execution_id, attempts=attempts, record=record
        )
        if requeued is None:
            return None
        _prepare_rerun(client, row=requeued, reason=reason)
        log.warning(
            "execution %s: attempt %d lost (%s); re-running it (retry: safe)",
            execution_id,
            attempts,
            reason,
        )
        return LostRun(requeued, requeued=True)
    if row.get("retry") == "safe":
        message = (
            f"{reason}; it ran {attempts} times and every one was lost: the "
            f"{max_retries} re-runs that retry: safe allows are used up"
        )
    else:
        message = f"{reason}; {NOT_RERUN}"
    finished = finish_execution(
        conn,
        execution_id=execution_id,
        status=ExecutionStatus.WORKER_LOST,
        error=error_dict(
            ErrorType.WORKER_LOST,
            message,
            details={"attempts": attempts, "retry": row.get("retry") or "never"},
        ),
    )
    if finished is None:
        return None
    settle_ended(conn, row=finished)
    return LostRun(finished, requeued=False)


def settle_ended(conn: psycopg.Connection[Row], *, row: Row) -> None:
    """The rest of the end of a run that its worker did not end (the reaper, a redelivered
    message), in the caller's transaction: its audit row learns how it ended, as the worker's
    ``store`` fills it, and its calls still waiting for approval are closed (out of the
    approvers' inbox, audited), as the worker's ``approvals.close`` stage closes them."""
    execution_id, status = str(row["id"]), str(row["status"])
    finish_audit(conn, execution_id=execution_id, status=status, trace=row.get("trace"))
    closed = close_run_approvals(conn, execution_id=execution_id, status=status)
    if closed:
        log.info("execution %s: %s unanswered approvals closed", execution_id, closed)


def _prepare_rerun(client: redis.Redis, *, row: Row, reason: str) -> None:
    """The next attempt gets a fresh tool grant lifetime and a clean death watch; waiters hear."""
    execution_id = str(row["id"])
    try:
        pipe = client.pipeline(transaction=False)
        pipe.expire(grant_key(execution_id), int(row["timeout_s"]) + GRANT_QUEUE_SLACK_S)
        pipe.delete(reap_suspect_key(execution_id))
        pipe.execute()
        publish_event(
            client,
            execution_id=execution_id,
            event={"type": RETRIED, "attempt": int(row["attempts"]) + 1, "reason": reason},
        )
    except redis.RedisError as exc:  # the grant outlives a short outage; waiters poll the row
        log.warning("execution %s: could not prepare its re-run: %s", execution_id, exc)
