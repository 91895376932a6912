"""Best-effort stage after the store: a run that ended while calls of its own waited for
approval (its time ran out, it was cancelled, its code stopped) closes their approvals, so
approvers are not asked about calls nothing will run (docs/policy.md)."""

from __future__ import annotations

import logging

from shared.approvals.store import close_run_approvals
from shared.executions.trace import EventType
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import with_db_retry

log = logging.getLogger(__name__)
# The trace statuses that answer a paused call (anything but its ``pending``).
_ANSWERED = frozenset({"approved", "denied", "expired"})


def close_unanswered(ctx: RunContext) -> None:
    """Close the run's approvals still open: only when its trace shows a paused call with no
    answer (most runs pay nothing: no database round trip)."""
    assert ctx.outcome is not None
    asked: set[str] = set()
    answered: set[str] = set()
    for event in ctx.outcome.trace:
        if event.get("type") == EventType.APPROVAL:
            seen = answered if event.get("status") in _ANSWERED else asked
            seen.add(str(event.get("call_id")))
    if not asked - answered:
        return
    closed = with_db_retry(
        lambda conn: close_run_approvals(
            conn, execution_id=ctx.execution_id, status=str(ctx.status)
        ),
        what="close approvals",
    )
    if closed:
        log.info("execution %s: %s unanswered approvals closed", ctx.execution_id, closed)
