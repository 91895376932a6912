"""REST for executions: submit (optionally wait), read, cancel, and stream events over SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.enqueue import submit_execution
from services.gateway.ops.execution_events import EventFollower
from services.gateway.ops.execution_reads import load_execution, read_execution, recent_executions
from services.gateway.ops.wait import wait_for_finish
from services.gateway.rest.deps import CurrentPrincipal, State
from services.gateway.rest.responses import execution_response
from shared.executions.events import FINISHED
from shared.executions.models import ExecutionRequest, ExecutionView, view_from_row
from shared.executions.status import TERMINAL
from shared.executions.trace import replay

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
    """Answer from the cache, or validate, record and enqueue under the caller's tool scope;
    with `wait` block until the execution is terminal."""
    row = await submit_execution(state, request=body, principal=principal)
    if (wait or body.wait) and row["status"] not in TERMINAL:
        row = await wait_for_finish(
            state, execution_id=str(row["id"]), timeout_s=row["timeout_s"], submitted=row
        )
    return execution_response(row)


@router.get("", summary="The caller's tenant's newest executions, newest first")
async def list_recent(
    state: State, principal: CurrentPrincipal, limit: int = Query(20, ge=1, le=200)
) -> dict[str, Any]:
    """Newest first; only the caller's tenant's executions."""
    rows = await recent_executions(state, tenant_id=principal.tenant_id, limit=limit)
    return {"executions": [view_from_row(r).model_dump(mode="json") for r in rows]}


@router.get("/{execution_id}", response_model=ExecutionView, summary="One execution")
async def read(state: State, principal: CurrentPrincipal, execution_id: str) -> ExecutionView:
    """The execution as stored (a stale one is reaped first); 404 for an unknown id or another
    tenant's."""
    return view_from_row(
        await read_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    )


@router.post(
    "/{execution_id}/cancel",
    response_model=ExecutionView,
    summary="Cancel an execution: at once when queued, by killing its sandbox when running",
)
async def cancel(
    state: State, principal: CurrentPrincipal, execution_id: str, wait: bool = Query(False)
) -> JSONResponse:
    """202 while a running execution is being stopped (200 when finished); 409 if already over."""
    row = await cancel_execution(
        state, execution_id=execution_id, tenant_id=principal.tenant_id, wait=wait
    )
    return execution_response(row)


@router.get("/{execution_id}/events", summary="Server-sent events of one execution")
async def events(
    state: State,
    principal: CurrentPrincipal,
    execution_id: str,
    last_event_id: Annotated[int, Header(alias="Last-Event-ID")] = 0,
) -> EventSourceResponse:
    """Progress, tool/capability start and end, then `execution.finished`; replayed from the start
    (or after `Last-Event-ID`) for late subscribers, then live."""
    tenant_id = principal.tenant_id
    await load_execution(
        state, execution_id=execution_id, tenant_id=tenant_id
    )  # 404 before opening a stream

    async def stream() -> AsyncIterator[dict[str, Any]]:
        async with EventFollower(
            state, execution_id=execution_id, after_seq=last_event_id
        ) as follow:
            row = await load_execution(state, execution_id=execution_id, tenant_id=tenant_id)
            if row["status"] in TERMINAL and not follow.replayed_any:
                # The event log expired: replay the stored trace instead.
                for kind, stored in replay(row.get("trace")):
                    yield {"event": kind, "data": orjson.dumps(stored).decode()}
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
