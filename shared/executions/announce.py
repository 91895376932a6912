"""A finished execution announced: what the sandbox's ``announce`` stage and a direct call send.

Queued on the caller's pipeline, so the announce rides one round trip (with a direct call's
record, say). The stored row goes first: a waiting request that wakes on the event finds it
there and need not read Postgres. Nothing here is a record: waiting clients also poll the
row, the bus never raises, and a lost metrics sample is only a lost sample.
"""

from __future__ import annotations

import time
from typing import Any

from shared import metrics
from shared.events import bus
from shared.executions.carried import queue_row
from shared.executions.events import FINISHED, queue_events


def queue_finished(
    pipe: Any,
    *,
    row: dict[str, Any],
    status: str,
    error: dict[str, Any] | None,
    duration_ms: float,
    stored_row: dict[str, Any] | None,
) -> None:
    """Queue on ``pipe`` the end of the execution ``row``: the stored row (when there is one),
    its `execution.finished` event (a waiting client wakes on it), its metrics sample and the
    tenant's bus event."""
    if stored_row is not None:
        queue_row(pipe, stored_row)
    # `ts` (epoch seconds) lets a client or benchmark see when the end was announced.
    finished = {"type": FINISHED, "status": status, "ts": time.time()}
    queue_events(pipe, events=[(str(row["id"]), finished)])
    metrics.queue_run(pipe, status=status, error=error, seconds=duration_ms / 1000)
    bus.queue(
        pipe,
        tenant_id=row["tenant_id"],
        type=bus.EventType.EXECUTION_FINISHED,
        data=bus.execution_finished({**row, "duration_ms": duration_ms}, status=status),
    )
