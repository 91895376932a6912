"""Waiting for an execution to end: its events passed on as they come, the row re-read (and
reaped) every second."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from services.gateway.ops.execution_events import EventFollower
from services.gateway.ops.execution_reads import read_execution
from services.gateway.state import GatewayState
from shared.executions.carried import carried_row, decode_row
from shared.executions.events import FINISHED, LEARNED, RETRIED
from shared.executions.status import TERMINAL, ExecutionStatus

Row = dict[str, Any]

# How long a waiting client gives the learning worker to report the capability.
LEARN_WAIT_S = 3.0


async def wait_for_finish(
    state: GatewayState,
    *,
    execution_id: str,
    timeout_s: float,
    on_event: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    submitted: Row | None = None,
    after_seq: int = 0,
) -> Row:
    """Block until the execution is terminal, passing every event (replayed, then live) on.

    Waits ``timeout_s`` plus the configured slack, counted again from each re-run
    (``"retry": "safe"``): the re-run gets its own wall time. Also re-reads the row every
    second, in case a worker died without publishing (the read reaps it, or re-queues it).
    ``submitted``: the row this request just recorded and enqueued; it is not read again
    before anything is heard (its end is in the replayed log if it came first).
    ``after_seq``: events up to this sequence number were passed on before (in an earlier
    round, or by a gateway that died): not again.
    """
    budget = timeout_s + state.settings.execution_wait_slack_s
    deadline = time.monotonic() + budget
    async with EventFollower(state, execution_id=execution_id, after_seq=after_seq) as events:
        row = submitted or await read_execution(state, execution_id=execution_id)
        retried = len(row.get("retries") or [])
        next_poll = time.monotonic() + 1.0
        finished = row["status"] in TERMINAL
        while not finished and time.monotonic() < deadline:
            event = await events.next(timeout_s=0.5)
            if event is not None and on_event is not None:
                await on_event(event)
            if (
                event is not None and event.get("type") in {FINISHED, RETRIED}
            ) or time.monotonic() >= next_poll:
                row = await _read_after(state, execution_id, event, events.carried)
                finished = row["status"] in TERMINAL
                next_poll = time.monotonic() + 1.0
                if len(row.get("retries") or []) > retried:
                    # Seen on the row, so a re-run whose event was lost extends it too.
                    retried = len(row.get("retries") or [])
                    deadline = time.monotonic() + budget
        if _learning_pending(row):
            # The response names the capability the run became; learning takes a few
            # milliseconds (an embedding for new code), so give it a short grace.
            learn_deadline = time.monotonic() + LEARN_WAIT_S
            while (remaining := learn_deadline - time.monotonic()) > 0:
                event = await events.next(timeout_s=remaining)
                if event is not None and event.get("type") == LEARNED:
                    break
            row = await read_execution(state, execution_id=execution_id)
        return row


async def _read_after(
    state: GatewayState, execution_id: str, event: dict[str, Any] | None, heard: bytes | None
) -> Row:
    """The row after ``event``: the one its worker carried with `execution.finished` when there
    is one (no thread hop, no SELECT: shared/executions/carried.py; ``heard``: published on the
    channel, so not even a GET), else read (and reaped)."""
    if event is not None and event.get("type") == FINISHED:
        row = (
            decode_row(heard)
            if heard is not None
            else await carried_row(state.aredis, execution_id)
        )
        if row is not None and row["status"] in TERMINAL:
            return row
    return await read_execution(state, execution_id=execution_id)


def _learning_pending(row: Row) -> bool:
    return (
        row["status"] == ExecutionStatus.SUCCEEDED
        and bool(row["intent"])
        and row["learned_at"] is None
    )
