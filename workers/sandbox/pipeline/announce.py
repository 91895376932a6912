"""Best-effort stage after the store: tell waiting clients, the tenant's bus and the metrics.

Nothing here fails a run (it is stored already): clients waiting on the event also poll
the row, the bus never raises, and a lost metrics sample is only a lost sample.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from shared.executions.announce import queue_finished
from shared.executions.events import FINISHED, publish_event
from workers.sandbox.pipeline.context import RunContext

log = logging.getLogger(__name__)


def announce(ctx: RunContext) -> None:
    """The stored run announced (``shared.executions.announce``), in one round trip."""
    assert ctx.outcome is not None and ctx.status is not None
    pipe = ctx.redis.pipeline(transaction=False)
    queue_finished(
        pipe,
        row=ctx.row,
        status=ctx.status,
        error=ctx.outcome.error,
        duration_ms=ctx.outcome.duration_ms,
        stored_row=ctx.stored_row,
    )
    try:
        pipe.execute()
    except redis.RedisError as exc:  # waiting clients poll the row; a lost sample is a sample
        log.warning("could not announce the end of %s: %s", ctx.execution_id, exc)


def announce_end(client: redis.Redis, execution_id: str, status: str, **extra: Any) -> None:
    """Publish `execution.finished`; a Redis error is logged (waiting clients poll the row)."""
    try:
        publish_event(
            client, execution_id=execution_id, event={"type": FINISHED, "status": status, **extra}
        )
    except redis.RedisError as exc:
        log.warning("could not announce the end of %s: %s", execution_id, exc)
