"""Enqueueing an admitted execution: its grant, then its message; a run that cannot be sent
is rejected, never left queued."""

from __future__ import annotations

import logging
from typing import Any

import redis
from anyio import to_thread

from services.gateway.ops.admission import Admission, admit, send_counters
from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.audit import finish_audit
from shared.auth.grants import Grant, write_grant
from shared.auth.principal import Principal
from shared.db import DictConnection
from shared.dispatch import send_run
from shared.errors import (
    DependencyError,
    ErrorType,
    error_dict,
)
from shared.events import bus
from shared.executions.events import FINISHED, publish_event
from shared.executions.models import ExecutionRequest
from shared.executions.status import ExecutionStatus
from shared.executions.store import (
    finish_execution,
)
from shared.logs import bind

log = logging.getLogger(__name__)

Row = dict[str, Any]


async def submit_execution(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    principal: Principal,
    capability_id: str | None = None,
) -> Row:
    """Answer from the result cache (a succeeded row at once), else record a queued execution
    (and its audit row), grant it the caller's tool scope and enqueue it; idempotent on
    `idempotency_key`. Checked, recorded, granted and sent in one thread hop.

    The scope is the request's `tools` intersected with the principal's allow-list; a
    capability run gets the caller's scope, never its author's.
    """

    def admit_and_send() -> tuple[Admission, Row | None]:
        # The admission's counters go with the run's grant: one Redis round trip for both.
        counters = state.redis.pipeline(transaction=False)
        admission = admit(state, request=request, principal=principal,
                          capability_id=capability_id, counters=counters)  # fmt: skip
        if _fails_at_once(admission):  # announced from the event loop, below
            send_counters(counters)
            return admission, None
        return admission, send_admitted(
            state, admission=admission, principal=principal, counters=counters
        )

    admission, row = await to_thread.run_sync(admit_and_send)
    if row is None:
        return await enqueue_admitted(state, admission=admission, principal=principal)
    if admission.created and not admission.hit:
        bind(execution_id=str(row["id"]))
    return row


async def enqueue_admitted(
    state: GatewayState, *, admission: Admission, principal: Principal
) -> Row:
    """A new execution gets its grant and is sent to the workers; a hit or a repeat is final."""
    row = admission.row
    if admission.hit or not admission.created:
        return row
    bind(execution_id=str(row["id"]))
    if admission.syntax is not None:
        return await _fail_at_once(state, execution_id=str(row["id"]), error=admission.syntax)
    return await to_thread.run_sync(
        lambda: send_admitted(state, admission=admission, principal=principal)
    )


def _fails_at_once(admission: Admission) -> bool:
    """A new execution whose code does not parse: failed without a sandbox."""
    return admission.created and not admission.hit and admission.syntax is not None


def send_admitted(
    state: GatewayState,
    *,
    admission: Admission,
    principal: Principal,
    counters: redis.client.Pipeline | None = None,
) -> Row:
    """Blocking: the new execution's grant, then its message (a hit or a repeat is final); a
    run that cannot be sent is rejected (BrokerUnavailable), never left queued. ``counters``:
    the admission's, not sent yet: they go in the grant's round trip (a failed counter is
    logged, as ``send_counters`` does; only the grant's failure rejects the run)."""
    row = admission.row
    if admission.hit or not admission.created:
        if counters is not None:
            send_counters(counters)
        return row
    execution_id = str(row["id"])
    grant = Grant.for_principal(
        principal,
        tools=admission.request.tools,
        surface="capability" if row.get("capability_id") else "code",
        language=admission.request.language,
    )
    try:
        # The grant exists before the message does: a worker never sees a run without one.
        if counters is None:
            write_grant(state.redis, execution_id=execution_id, grant=grant,
                        timeout_s=float(row["timeout_s"]))  # fmt: skip
        else:
            _grant_with(counters, execution_id=execution_id, grant=grant,
                        timeout_s=float(row["timeout_s"]))  # fmt: skip
        send_run(state.celery, execution_id)
    except Exception as exc:  # Redis or broker down: never leave a queued row nobody will run
        reason = f"could not enqueue: {exc}"
        with state.pool.connection() as conn:
            finish_execution(
                conn,
                execution_id=execution_id,
                status=ExecutionStatus.REJECTED,
                error=error_dict(ErrorType.BROKER_UNAVAILABLE, reason),
                from_statuses=(ExecutionStatus.QUEUED,),
            )
        raise DependencyError(f"the task broker is unavailable: {exc}") from exc
    return row


def _grant_with(
    counters: redis.client.Pipeline, *, execution_id: str, grant: Grant, timeout_s: float
) -> None:
    """The grant written on the admission's pipeline, sent with its counters; raises what the
    grant's write met (a counter's failure is logged)."""
    write_grant(counters, execution_id=execution_id, grant=grant, timeout_s=timeout_s)
    replies = counters.execute(raise_on_error=False)
    if isinstance(replies[-1], Exception):
        raise replies[-1]
    if failed := [r for r in replies[:-1] if isinstance(r, Exception)]:
        log.warning("could not send %d counters/events of a submission: %s", len(failed), failed[0])


async def _fail_at_once(state: GatewayState, *, execution_id: str, error: dict[str, Any]) -> Row:
    """Record a queued execution as failed without running it (its code does not parse)."""

    def fail(conn: DictConnection) -> Row:
        row = finish_execution(
            conn,
            execution_id=execution_id,
            status=ExecutionStatus.FAILED,
            error=error,
            from_statuses=(ExecutionStatus.QUEUED,),
        )
        assert row is not None  # created by this request a moment ago, not yet enqueued
        finish_audit(conn, execution_id=execution_id, status=row["status"], trace=None)
        return row

    row = await in_pool(state, fail)  # committed before anyone hears it ended

    def announce() -> None:
        publish_event(
            state.redis,
            execution_id=execution_id,
            event={"type": FINISHED, "status": row["status"]},
        )
        _announce_finished(state, row, tenant_id=row["tenant_id"])

    await to_thread.run_sync(announce)
    return row


def _announce_finished(state: GatewayState, row: Row, *, tenant_id: str) -> None:
    """`execution.finished` on the tenant's event stream (`GET /v1/events`)."""
    bus.publish(
        state.redis,
        tenant_id=tenant_id,
        type=bus.EventType.EXECUTION_FINISHED,
        data=bus.execution_finished(row),
    )
