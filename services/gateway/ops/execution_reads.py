"""Reading executions (REST and MCP alike): one by id, reaped first when its worker is gone;
a page of a tenant's (filtered by status and error type), and their breakdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.approvals.store import pending_of_executions, pending_view
from shared.db import DictConnection, autocommit
from shared.dispatch import resend_run, send_ingest
from shared.errors import NotFound
from shared.executions.carried import carried_row
from shared.executions.models import ExecutionView
from shared.executions.pages import Part, page_of, part_text
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.store import (
    count_executions,
    execution_breakdown,
    get_execution,
    list_executions,
)
from shared.privacy.keys import PiiKeys
from shared.recovery.reaper import reap_stale

Row = dict[str, Any]


def reap_if_stale(state: GatewayState, conn: DictConnection, row: Row) -> Row:
    """A queued/running row whose worker died (or that nobody came for) ends now, with the reason.

    So a client reading or waiting on an execution never waits for the beat's next pass.
    """
    if row["status"] in TERMINAL:
        return row

    def ingest(execution_id: str) -> None:  # the run is final: learning gets it (or the sweep)
        send_ingest(state.celery, execution_id)

    def rerun(execution_id: str) -> None:  # re-queued ("retry": "safe"): its worker died
        resend_run(state.celery, execution_id)

    reaped = reap_stale(
        conn,
        state.redis,
        queue_max_s=state.settings.execution_queue_max_s,
        max_retries=state.settings.execution_max_retries,
        execution_id=str(row["id"]),
        on_finished=ingest,
        on_requeued=rerun,
    )
    return reaped[0] if reaped else row


async def load_execution(
    state: GatewayState, *, execution_id: str, tenant_id: str | None = None
) -> Row:
    """The execution as stored, not reaped; NotFound for an unknown id (or, with ``tenant_id``,
    another tenant's: never a leak). A direct call answered a moment ago and not written yet
    is read as its end carried it (``_unwritten``)."""
    try:
        return await in_pool(
            state, lambda conn: _found(conn, execution_id=execution_id, tenant_id=tenant_id)
        )
    except NotFound:
        return await _unwritten(state, execution_id=execution_id, tenant_id=tenant_id)


async def read_execution(
    state: GatewayState, *, execution_id: str, tenant_id: str | None = None
) -> Row:
    """``load_execution``, a stale one reaped first. REST's GET and MCP's get_execution both
    read through here, so both see a dead worker's run end the same way."""

    def read(conn: DictConnection) -> Row:  # one thread hop and one connection for both
        with autocommit(conn):  # one read: no BEGIN and COMMIT round trips around it
            row = _found(conn, execution_id=execution_id, tenant_id=tenant_id)
        row = reap_if_stale(state, conn, row)  # its own transaction, if it is not final
        (row,) = with_pending_approvals(state, conn, [row])
        return row

    try:
        return await in_pool(state, read)
    except NotFound:
        return await _unwritten(state, execution_id=execution_id, tenant_id=tenant_id)


def with_pending_approvals(state: GatewayState, conn: DictConnection, rows: list[Row]) -> list[Row]:
    """The rows, each running one whose calls wait for an answer with its
    ``pending_approvals`` (so it reads as ``waiting_approval``: ``view_from_row``); one
    query for them all, none without a policy file (nothing can wait then)."""
    running = [str(r["id"]) for r in rows if r["status"] == ExecutionStatus.RUNNING]
    if not running or not state.policy.configured:
        return rows
    pending = pending_of_executions(conn, running)
    if not pending:
        return rows
    keys = PiiKeys.from_settings(state.settings)  # the calls' arguments are sealed
    return [
        {**r, "pending_approvals": [pending_view(p, keys) for p in pending[str(r["id"])]]}
        if str(r["id"]) in pending
        else r
        for r in rows
    ]


async def pending_approvals(
    state: GatewayState, *, execution_id: str, tenant_id: str
) -> list[dict[str, Any]]:
    """The execution's calls waiting for an answer now, as its read shows them (an SSE
    ``approval`` event carries them: ``rest/executions.py``)."""

    def read(conn: DictConnection) -> list[dict[str, Any]]:
        row = _found(conn, execution_id=execution_id, tenant_id=tenant_id)
        (row,) = with_pending_approvals(state, conn, [row])
        return list(row.get("pending_approvals") or [])

    return await in_pool(state, read)


async def _unwritten(state: GatewayState, *, execution_id: str, tenant_id: str | None) -> Row:
    """A direct call's row between its answer and its write (``shared/direct``: milliseconds),
    as its end carried it; NotFound when there is none (or it is another tenant's)."""
    row = await carried_row(state.aredis, execution_id)
    if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
        raise NotFound(f"no execution with id {execution_id!r}", id=execution_id)
    return row


async def recent_executions(
    state: GatewayState,
    *,
    tenant_id: str,
    limit: int,
    offset: int = 0,
    statuses: Sequence[str] = (),
    error_types: Sequence[str] = (),
    brief: bool = False,
    user_id: str | None = None,
) -> tuple[list[Row], int]:
    """A page of the tenant's executions, newest first, with these statuses and error types
    (empty: any), and how many match in all; both read in one transaction. ``brief``: without
    results and stdout; ``user_id``: only that person's."""

    def read(conn: DictConnection) -> tuple[list[Row], int]:
        rows = list_executions(
            conn, tenant_id=tenant_id, limit=limit, offset=offset, statuses=statuses,
            error_types=error_types, brief=brief, user_id=user_id,
        )  # fmt: skip
        total = count_executions(
            conn, tenant_id=tenant_id, statuses=statuses, error_types=error_types, user_id=user_id
        )
        return with_pending_approvals(state, conn, rows), total

    return await in_pool(state, read)


async def executions_breakdown(state: GatewayState, *, tenant_id: str) -> list[Row]:
    """The tenant's executions counted per (status, error type)."""
    return await in_pool(state, lambda conn: execution_breakdown(conn, tenant_id=tenant_id))


def paged_view(view: ExecutionView, *, part: Part, offset: int, max_bytes: int) -> ExecutionView:
    """The execution with one page of ``part`` in ``page`` and its large parts left empty
    (REST's ``?part=`` and MCP's get_execution alike)."""
    page = page_of(part_text(view, part), part=part, offset=offset, max_bytes=max_bytes)
    empty: dict[str, Any] = {"result": None, "stdout": "", "tool_calls": [], "tool_failures": []}
    return view.model_copy(update={**empty, "page": page})


def _found(conn: DictConnection, *, execution_id: str, tenant_id: str | None) -> Row:
    row = get_execution(conn, execution_id=execution_id, tenant_id=tenant_id)
    if row is None:
        raise NotFound(f"no execution with id {execution_id!r}", id=execution_id)
    return row
