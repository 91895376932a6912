"""REST for executions: submit (optionally wait), read, and stream events over SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from anyio import to_thread
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from services.gateway.deps import State
from services.gateway.executions import submit_execution, wait_for_finish
from shared.errors import NotFound
from shared.executions.events import FINISHED
from shared.executions.models import TERMINAL, ExecutionRequest, ExecutionView, view_from_row
from shared.executions.store import get_execution
from shared.queues import events_channel

router = APIRouter(prefix="/v1/executions", tags=["executions"])


@router.post(
    "",
    status_code=202,
    response_model=ExecutionView,
    summary="Run Python in a sandbox; 202 with the id, or the finished execution with wait=true",
)
async def create(state: State, body: ExecutionRequest, wait: bool = Query(False)) -> JSONResponse:
    """Validate, record and enqueue; with `wait` block until the execution is terminal."""
    row = await submit_execution(state, request=body)
    if wait or body.wait:
        row = await wait_for_finish(state, execution_id=str(row["id"]), timeout_s=row["timeout_s"])
    view = view_from_row(row)
    status = 200 if view.status in TERMINAL else 202
    return JSONResponse(view.model_dump(mode="json"), status_code=status)


@router.get("/{execution_id}", response_model=ExecutionView, summary="One execution")
async def read(state: State, execution_id: str) -> ExecutionView:
    """The execution as stored; 404 for an unknown id."""
    return view_from_row(await _load(state, execution_id))


@router.get("/{execution_id}/events", summary="Server-sent events of one execution")
async def events(state: State, execution_id: str) -> EventSourceResponse:
    """Live progress, tool_start/tool_end and the final `execution.finished` event."""
    await _load(state, execution_id)  # 404 before opening a stream

    async def stream() -> AsyncIterator[dict[str, Any]]:
        pubsub = state.aredis.pubsub()
        await pubsub.subscribe(events_channel(execution_id))
        try:
            # Subscribe first, then look: an execution that finished meanwhile is replayed.
            row = await _load(state, execution_id)
            if row["status"] in TERMINAL:
                for event in row.get("trace") or []:
                    yield {
                        "event": event.get("type", "event"),
                        "data": orjson.dumps(event).decode(),
                    }
                yield _finished_event(row)
                return
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=15)
                if message is None:
                    yield {"comment": "keep-alive"}
                    continue
                event = orjson.loads(message["data"])
                yield {"event": event.get("type", "event"), "data": orjson.dumps(event).decode()}
                if event.get("type") == FINISHED:
                    return
        finally:
            await pubsub.aclose()

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
