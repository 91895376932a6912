"""REST for executions: submit (optionally wait), read, and stream events over SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from anyio import to_thread
from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from services.gateway.deps import CurrentPrincipal, State
from services.gateway.events import EventFollower
from services.gateway.executions import submit_execution, wait_for_finish
from shared.errors import Conflict, ErrorType, NotFound, error_dict
from shared.executions.cancel import request_cancel
from shared.executions.events import FINISHED, publish_event
from shared.executions.models import ExecutionRequest, ExecutionView, view_from_row
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.store import finish_execution, get_execution
from shared.executions.trace import event_type

router = APIRouter(prefix="/v1/executions", tags=["executions"])


@router.post(
    "",
    status_code=202,
    response_model=ExecutionView,
    summary="Run Python in a sandbox; 202 with the id, or the finished execution with wait=true",
)
async def create(
    state: State, principal: CurrentPrincipal, body: ExecutionRequest, wait: bool = Query(False)
) -> JSONResponse:
    """Validate, record and enqueue under the caller's tool scope; with `wait` block until terminal."""
    row = await submit_execution(state, request=body, principal=principal)
    if wait or body.wait:
        row = await wait_for_finish(state, execution_id=str(row["id"]), timeout_s=row["timeout_s"])
    view = view_from_row(row)
    status = 200 if view.status in TERMINAL else 202
    return JSONResponse(view.model_dump(mode="json"), status_code=status)


@router.get("/{execution_id}", response_model=ExecutionView, summary="One execution")
async def read(state: State, execution_id: str) -> ExecutionView:
    """The execution as stored; 404 for an unknown id."""
    return view_from_row(await _load(state, execution_id))


@router.post(
    "/{execution_id}/cancel",
    response_model=ExecutionView,
    summary="Cancel an execution: at once when queued, by killing its sandbox when running",
)
async def cancel(state: State, execution_id: str, wait: bool = Query(False)) -> JSONResponse:
    """202 while a running execution is being stopped (200 when finished); 409 if already over."""
    row = await _load(state, execution_id)
    if row["status"] in TERMINAL:
        raise Conflict(
            f"execution {execution_id} already ended as {row['status']}", status=row["status"]
        )

    def cancel_queued() -> dict[str, Any] | None:
        with state.pool.connection() as conn:
            return finish_execution(
                conn,
                execution_id=execution_id,
                status=ExecutionStatus.CANCELLED,
                error=error_dict(ErrorType.CANCELLED, "cancelled before it started"),
                from_statuses=(ExecutionStatus.QUEUED,),
            )

    finished = await to_thread.run_sync(cancel_queued)
    if finished is not None:
        await to_thread.run_sync(
            lambda: publish_event(
                state.redis,
                execution_id=execution_id,
                event={"type": FINISHED, "status": ExecutionStatus.CANCELLED},
            )
        )
        row = finished
    else:  # running (or just claimed): the worker watching this flag kills the sandbox
        await to_thread.run_sync(lambda: request_cancel(state.redis, execution_id=execution_id))
        if wait:
            row = await wait_for_finish(state, execution_id=execution_id, timeout_s=10)
        else:
            row = await _load(state, execution_id)
    view = view_from_row(row)
    return JSONResponse(
        view.model_dump(mode="json"), status_code=200 if view.status in TERMINAL else 202
    )


@router.get("/{execution_id}/events", summary="Server-sent events of one execution")
async def events(
    state: State,
    execution_id: str,
    last_event_id: Annotated[int, Header(alias="Last-Event-ID")] = 0,
) -> EventSourceResponse:
    """Progress, tool/capability start and end, then `execution.finished`; replayed from the start
    (or after `Last-Event-ID`) for late subscribers, then live."""
    await _load(state, execution_id)  # 404 before opening a stream

    async def stream() -> AsyncIterator[dict[str, Any]]:
        async with EventFollower(
            state, execution_id=execution_id, after_seq=last_event_id
        ) as follow:
            row = await _load(state, execution_id)
            if row["status"] in TERMINAL and not follow.replayed_any:
                # The event log expired: replay the stored trace instead.
                for event in row.get("trace") or []:
                    yield {
                        "event": event_type(event) or "event",
                        "data": orjson.dumps(event).decode(),
                    }
                yield _finished_event(row)
                return
            while True:
                event = await follow.next(timeout_s=15)
                if event is None:
                    yield {"comment": "keep-alive"}
                    continue
                yield {
                    "id": str(event.get("seq", "")),
                    "event": str(event.get("type", "event")),
                    "data": orjson.dumps(event).decode(),
                }
                if event.get("type") == FINISHED:
                    return

    return EventSourceResponse(stream())


def _finished_event(row: dict[str, Any]) -> dict[str, Any]:
    view = view_from_row(row)
    data = {"type": FINISHED, "execution_id": view.id, "status": view.status}
    return {"event": FINISHED, "data": orjson.dumps(data).decode()}


async def _load(state: State, execution_id: str) -> dict[str, Any]:
    def load() -> dict[str, Any] | None:
        with state.pool.connection() as conn:
            return get_execution(conn, execution_id=execution_id)

    row = await to_thread.run_sync(load)
    if row is None:
        raise NotFound(f"no execution with id {execution_id!r}", id=execution_id)
    return row
