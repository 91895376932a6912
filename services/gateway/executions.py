"""Submitting an execution: validate against limits and known tools, record, enqueue, wait."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import to_thread

from services.gateway.config import GatewayState
from services.gateway.events import EventFollower
from shared.errors import DependencyError, ErrorType, ValidationFailed, error_dict
from shared.executions.events import FINISHED, LEARNED
from shared.executions.models import ExecutionRequest
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.store import create_execution, finish_execution, get_execution
from shared.inputs import check_value
from shared.queues import TaskName
from shared.tools.store import get_tools

Row = dict[str, Any]

# How long past its own timeout a waiting client keeps waiting: queueing and sandbox
# start-up; after that it gets the still-running execution and can poll.
WAIT_SLACK_S = 30.0
# How long a waiting client gives the learning worker to report the capability.
LEARN_WAIT_S = 3.0


def validate_request(state: GatewayState, request: ExecutionRequest) -> float:
    """Check size and limits before anything is written; returns the effective timeout."""
    settings = state.settings
    size = len(request.code.encode())
    if size > settings.sandbox_code_bytes:
        raise ValidationFailed(
            f"code is {size} bytes; the limit is {settings.sandbox_code_bytes}",
            field="code",
            limit=settings.sandbox_code_bytes,
        )
    # The same check the sandbox makes before starting the child (depth, size, JSON-ness).
    check_value(request.args, field="args", max_bytes=settings.sandbox_tool_args_bytes)
    timeout_s = request.timeout_s or settings.sandbox_wall_time_s
    if timeout_s > settings.sandbox_max_wall_time_s:
        raise ValidationFailed(
            f"timeout_s {timeout_s} exceeds the maximum {settings.sandbox_max_wall_time_s}",
            field="timeout_s",
        )
    return timeout_s


def unknown_tools(state: GatewayState, tools: list[str]) -> list[str]:
    """Tool ids in the requested scope that the toolhost has never seen."""
    if not tools:
        return []
    with state.pool.connection() as conn:
        known = get_tools(conn, ids=tools)
    return [t for t in tools if t not in known]


async def submit_execution(
    state: GatewayState, *, request: ExecutionRequest, capability_id: str | None = None
) -> Row:
    """Record a queued execution and enqueue it; idempotent on `idempotency_key`."""
    timeout_s = validate_request(state, request)
    missing = await to_thread.run_sync(unknown_tools, state, request.tools or [])
    if missing:
        raise ValidationFailed(
            f"unknown tools in scope: {', '.join(missing)}: find tool ids with search_tools "
            "(MCP) or GET /v1/tools",
            tools=missing,
        )

    def create() -> tuple[Row, bool]:
        with state.pool.connection() as conn:
            return create_execution(
                conn, request=request, timeout_s=timeout_s, capability_id=capability_id
            )

    row, created = await to_thread.run_sync(create)
    if not created:
        return row
    execution_id = str(row["id"])
    try:
        await to_thread.run_sync(
            lambda: state.celery.send_task(TaskName.RUN_EXECUTION, args=[execution_id])
        )
    except Exception as exc:  # broker down: never leave a queued row nobody will run
        reason = f"could not enqueue: {exc}"

        def reject() -> None:
            with state.pool.connection() as conn:
                finish_execution(
                    conn,
                    execution_id=execution_id,
                    status=ExecutionStatus.REJECTED,
                    error=error_dict(ErrorType.BROKER_UNAVAILABLE, reason),
                    from_statuses=(ExecutionStatus.QUEUED,),
                )

        await to_thread.run_sync(reject)
        raise DependencyError(f"the task broker is unavailable: {exc}") from exc
    return row


async def wait_for_finish(
    state: GatewayState,
    *,
    execution_id: str,
    timeout_s: float,
    on_event: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> Row:
    """Block until the execution is terminal, passing every event (replayed, then live) on.

    Also re-reads the row every second, in case a worker died without publishing.
    """
    deadline = time.monotonic() + timeout_s + WAIT_SLACK_S
    async with EventFollower(state, execution_id=execution_id) as events:
        row = await _fetch(state, execution_id)
        next_poll = time.monotonic() + 1.0
        finished = row["status"] in TERMINAL
        while not finished and time.monotonic() < deadline:
            event = await events.next(timeout_s=0.5)
            if event is not None and on_event is not None:
                await on_event(event)
            if (
                event is not None and event.get("type") == FINISHED
            ) or time.monotonic() >= next_poll:
                row = await _fetch(state, execution_id)
                finished = row["status"] in TERMINAL
                next_poll = time.monotonic() + 1.0
        if _learning_pending(row):
            # The response names the capability the run became; learning takes a few
            # milliseconds (an embedding for new code), so give it a short grace.
            learn_deadline = time.monotonic() + LEARN_WAIT_S
            while (remaining := learn_deadline - time.monotonic()) > 0:
                event = await events.next(timeout_s=remaining)
                if event is not None and event.get("type") == LEARNED:
                    break
            row = await _fetch(state, execution_id)
        return row


def _learning_pending(row: Row) -> bool:
    return (
        row["status"] == ExecutionStatus.SUCCEEDED
        and bool(row["intent"])
        and row["learned_at"] is None
    )


async def _fetch(state: GatewayState, execution_id: str) -> Row:
    def load() -> Row:
        with state.pool.connection() as conn:
            row = get_execution(conn, execution_id=execution_id)
        assert row is not None
        return row

    return await to_thread.run_sync(load)
