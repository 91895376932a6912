"""REST for executions: submit (optionally wait), list (filtered, paged) and count, read (the
view, the submission), cancel, and stream events over SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Query
from fastapi.responses import Response
from sse_starlette.sse import EventSourceResponse

from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.enqueue import submit_execution
from services.gateway.ops.execution_events import EventFollower
from services.gateway.ops.execution_feedback import report_execution
from services.gateway.ops.execution_reads import (
    executions_breakdown,
    load_execution,
    paged_view,
    pending_approvals,
    read_execution,
    recent_executions,
)
from services.gateway.ops.models.executions import (
    ExecutionBreakdown,
    ExecutionPage,
    ExecutionSubmission,
    breakdown,
    list_item,
    submission,
)
from services.gateway.ops.models.feedback import ExecutionFeedback, FeedbackResult
from services.gateway.ops.wait import wait_for_finish
from services.gateway.rest.deps import CurrentPrincipal, State
from services.gateway.rest.responses import execution_response
from services.gateway.state import GatewayState
from shared.errors import ErrorType
from shared.executions.events import FINISHED
from shared.executions.models import ExecutionRequest, ExecutionView, view_from_row
from shared.executions.pages import PART_DESCRIPTION, Part
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.trace import EventType, replay
from shared.inputs import SQL_INT_MAX

router = APIRouter(prefix="/v1/executions", tags=["executions"])

# A stream quiet this long checks the row (and sends a keep-alive comment while it runs).
STREAM_CHECK_S = 5.0


@router.post(
    "",
    status_code=202,
    response_model=ExecutionView,
    summary="Run Python in a sandbox; 202 with the id, or the finished execution with wait=true",
)
async def create(
    state: State, principal: CurrentPrincipal, body: ExecutionRequest, wait: bool = Query(False)
) -> Response:
    """Answer from the cache, or validate, record and enqueue under the caller's tool scope;
    with `wait` block until the execution is terminal."""
    row = await submit_execution(state, request=body, principal=principal)
    if (wait or body.wait) and row["status"] not in TERMINAL:
        row = await wait_for_finish(
            state, execution_id=str(row["id"]), timeout_s=row["timeout_s"], submitted=row
        )
    return execution_response(row)


@router.get(
    "",
    response_model=ExecutionPage,
    summary="The caller's tenant's executions, newest first: filter by status and error type, page",
)
async def list_recent(
    state: State,
    principal: CurrentPrincipal,
    status: list[ExecutionStatus] = Query(
        [], description="only these statuses (repeat the parameter for several)"
    ),
    error_type: list[ErrorType] = Query(
        [], description="only runs whose error has one of these types, e.g. `runtime_error`"
    ),
    limit: int = Query(20, ge=1, le=200),
    offset: int = Query(0, ge=0, le=SQL_INT_MAX, description="skip this many (paging)"),
    brief: bool = Query(
        False,
        description="leave out each `result` and `stdout` (null and empty: they may be "
        "megabytes); read one execution for them",
    ),
    user: str | None = Query(
        None, max_length=255, description="only runs this person submitted (their `user_id`)"
    ),
) -> ExecutionPage:
    """Newest first; only the caller's tenant's executions; `total` counts every page."""
    rows, total = await recent_executions(
        state, tenant_id=principal.tenant_id, limit=limit, offset=offset,
        statuses=status, error_types=error_type, brief=brief, user_id=user,
    )  # fmt: skip
    return ExecutionPage(
        executions=[list_item(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.get(
    "/breakdown",
    response_model=ExecutionBreakdown,
    summary="The tenant's executions counted by status and by error type",
)
async def breakdown_of(state: State, principal: CurrentPrincipal) -> ExecutionBreakdown:
    """Which runs fail and why: every execution of the caller's tenant, counted."""
    return breakdown(await executions_breakdown(state, tenant_id=principal.tenant_id))


@router.get(
    "/{execution_id}/submission",
    response_model=ExecutionSubmission,
    summary="What was submitted: the code, its args, the tool scope and the timeout",
)
async def read_submission(
    state: State, principal: CurrentPrincipal, execution_id: str
) -> ExecutionSubmission:
    """404 for an unknown id or another tenant's."""
    return submission(
        await load_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    )


@router.get("/{execution_id}", response_model=ExecutionView, summary="One execution")
async def read(
    state: State,
    principal: CurrentPrincipal,
    execution_id: str,
    part: Part | None = Query(None, description=PART_DESCRIPTION),
    offset: int = Query(
        0, ge=0, le=SQL_INT_MAX, description="with `part`: the first byte to return"
    ),
    max_bytes: int = Query(1 << 20, ge=1024, le=64 << 20, description="with `part`: page size"),
) -> ExecutionView:
    """The execution as stored (a stale one is reaped first); 404 for an unknown id or another
    tenant's. With ``part``, one page of that part (``page``), the large parts left empty."""
    view = view_from_row(
        await read_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    )
    if part is None:
        return view
    return paged_view(view, part=part, offset=offset, max_bytes=max_bytes)


@router.post(
    "/{execution_id}/cancel",
    response_model=ExecutionView,
    summary="Cancel an execution: at once when queued, by killing its sandbox when running",
)
async def cancel(
    state: State, principal: CurrentPrincipal, execution_id: str, wait: bool = Query(False)
) -> Response:
    """202 while a running execution is being stopped (200 when finished); 409 if already over."""
    row = await cancel_execution(
        state, execution_id=execution_id, tenant_id=principal.tenant_id, wait=wait
    )
    return execution_response(row)


@router.post(
    "/{execution_id}/feedback",
    response_model=FeedbackResult,
    summary="Say whether a finished run was right; a wrong one stops being learned evidence",
)
async def feedback(
    state: State, principal: CurrentPrincipal, execution_id: str, body: ExecutionFeedback
) -> FeedbackResult:
    """``ok: false`` un-teaches the run: the capability it alone created is deleted, one it
    counted for counts it as a failure, its cached results go; 409 while it still runs."""
    return await report_execution(state, execution_id=execution_id, body=body, principal=principal)


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
                event = await follow.next(timeout_s=STREAM_CHECK_S)
                if event is None:
                    # Pub/sub delivers at most once: a live event lost on the way (a
                    # subscriber reconnecting, say) must not hold the stream open past the
                    # run's end, so a quiet stream asks the row (reaped if its worker died).
                    row = await read_execution(
                        state, execution_id=execution_id, tenant_id=tenant_id
                    )
                    if row["status"] not in TERMINAL:
                        yield {"comment": "keep-alive"}
                        continue
                    await follow.catch_up()  # what was logged and not heard comes first
                    while (event := await follow.next(timeout_s=0)) is not None:
                        yield _sse_event(event)
                        if event.get("type") == FINISHED:
                            return
                    yield _finished_event(row)
                    return
                if event.get("type") == EventType.APPROVAL:  # who is asked, as of now
                    event = await _with_pending(state, event, execution_id, tenant_id)
                yield _sse_event(event)
                if event.get("type") == FINISHED:
                    return

    return EventSourceResponse(stream())


async def _with_pending(
    state: GatewayState, event: dict[str, Any], execution_id: str, tenant_id: str
) -> dict[str, Any]:
    """An ``approval`` event with the run's calls waiting for an answer now
    (``pending_approvals``, as its read shows them) and the status that makes it
    (``execution_status``: ``waiting_approval`` while any waits, else ``running``)."""
    pending = await pending_approvals(state, execution_id=execution_id, tenant_id=tenant_id)
    status = ExecutionStatus.WAITING_APPROVAL if pending else ExecutionStatus.RUNNING
    return {**event, "pending_approvals": pending, "execution_status": str(status)}


def _sse_event(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(event.get("seq", "")),
        "event": str(event.get("type", "event")),
        "data": orjson.dumps(event).decode(),
    }


def _finished_event(row: dict[str, Any]) -> dict[str, Any]:
    view = view_from_row(row)
    data = {"type": FINISHED, "execution_id": view.id, "status": view.status}
    return {"event": FINISHED, "data": orjson.dumps(data).decode()}
