"""Best-effort stage after the store: tell waiting clients, the tenant's bus and the metrics.

Nothing here fails a run (it is stored already): clients waiting on the event also poll
the row, the bus never raises, and a lost metrics sample is only a lost sample.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from shared import metrics
from shared.events import bus
from shared.executions.carried import queue_row
from shared.executions.events import FINISHED, publish_event, queue_events
from workers.sandbox.pipeline.context import RunContext

log = logging.getLogger(__name__)


def announce(ctx: RunContext) -> None:
    """The stored run: its `execution.finished` event (first: a waiting client wakes on it),
    its metrics sample and bus event, in one round trip. The stored row goes first: a waiting
    request that wakes on the event finds it there and need not read Postgres."""
    assert ctx.outcome is not None and ctx.status is not None
    outcome, seconds = ctx.outcome, ctx.outcome.duration_ms / 1000
    pipe = ctx.redis.pipeline(transaction=False)
    if ctx.stored_row is not None:
        queue_row(pipe, ctx.stored_row)
    # `ts` (epoch seconds) lets a client or benchmark see when the end was announced.
    finished = {"type": FINISHED, "status": ctx.status, "ts": time.time()}
    queue_events(ctx.redis, pipe, events=[(ctx.execution_id, finished)])
    metrics.queue_run(pipe, status=ctx.status, error=outcome.error, seconds=seconds)
    bus.queue(
        pipe,
        tenant_id=ctx.row["tenant_id"],
        type=bus.EventType.EXECUTION_FINISHED,
        data=bus.execution_finished(
            {**ctx.row, "duration_ms": outcome.duration_ms}, status=ctx.status
        ),
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
