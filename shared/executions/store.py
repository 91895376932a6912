"""Rows of the `executions` table: create (idempotent), claim, finish, read. Keyword-only CRUD."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from shared.config import DEFAULT_TENANT
from shared.executions.models import ExecutionRequest
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.trace import summarize
from shared.telemetry import current_trace_id

Row = dict[str, Any]


def create_execution(
    conn: psycopg.Connection[Row],
    *,
    request: ExecutionRequest,
    timeout_s: float,
    tenant_id: str = DEFAULT_TENANT,
    capability_id: str | None = None,
) -> tuple[Row, bool]:
    """Insert a queued execution; with an idempotency key already used, return that row instead.

    Returns (row, created). ON CONFLICT makes two racing submissions of one key yield one row.
    """
    row = conn.execute(
        """
        INSERT INTO executions (tenant_id, code, intent, args, tools, timeout_s,
                                idempotency_key, capability_id, retry, trace_id)
        VALUES (%(tenant)s, %(code)s, %(intent)s, %(args)s, %(tools)s, %(timeout)s, %(key)s,
                %(cap)s, %(retry)s, %(trace)s)
        ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
        RETURNING *
        """,
        request_params(request, tenant_id=tenant_id, timeout_s=timeout_s, cap=capability_id),
    ).fetchone()
    if row is not None:
        return row, True
    return _by_idempotency_key(conn, tenant_id=tenant_id, key=request.idempotency_key), False


def request_params(
    request: ExecutionRequest, *, tenant_id: str, timeout_s: float, cap: str | None
) -> dict[str, Any]:
    """The query parameters every new execution row takes from its request."""
    return {
        "tenant": tenant_id,
        "code": request.code,
        "intent": request.intent,
        "args": Jsonb(request.args),
        "tools": Jsonb(request.tools) if request.tools is not None else None,
        "timeout": timeout_s,
        "key": request.idempotency_key,
        "cap": cap,
        "retry": request.retry,
        "trace": current_trace_id(),  # the submission's trace (null when not tracing)
    }


def _by_idempotency_key(conn: psycopg.Connection[Row], *, tenant_id: str, key: str | None) -> Row:
    existing = conn.execute(
        "SELECT * FROM executions WHERE tenant_id = %s AND idempotency_key = %s", (tenant_id, key)
    ).fetchone()
    assert existing is not None  # the conflict proves it exists
    return existing


def get_execution(
    conn: psycopg.Connection[Row], *, execution_id: str, tenant_id: str | None = None
) -> Row | None:
    """One execution by id (None for unknown or malformed ids)."""
    try:
        UUID(execution_id)
    except ValueError:
        return None
    if tenant_id is None:
        return conn.execute("SELECT * FROM executions WHERE id = %s", (execution_id,)).fetchone()
    return conn.execute(
        "SELECT * FROM executions WHERE id = %s AND tenant_id = %s", (execution_id, tenant_id)
    ).fetchone()


def list_executions(conn: psycopg.Connection[Row], *, tenant_id: str, limit: int) -> list[Row]:
    """A tenant's newest executions, newest first."""
    return conn.execute(
        "SELECT * FROM executions WHERE tenant_id = %s ORDER BY created_at DESC LIMIT %s",
        (tenant_id, limit),
    ).fetchall()


def finished_executions(
    conn: psycopg.Connection[Row], *, ids: Sequence[str], tenant_id: str
) -> list[str]:
    """Those of ``ids`` (strings that may not be uuids) naming a tenant's finished executions."""
    valid = []
    for i in ids:
        try:
            valid.append(str(UUID(i)))
        except ValueError:
            continue
    if not valid:
        return []
    rows = conn.execute(
        "SELECT id FROM executions WHERE id = ANY(%s::uuid[]) AND tenant_id = %s "
        "AND status = ANY(%s)",
        (valid, tenant_id, [str(s) for s in TERMINAL]),
    ).fetchall()
    return [str(r["id"]) for r in rows]


def claim_execution(conn: psycopg.Connection[Row], *, execution_id: str, worker: str) -> Row | None:
    """Move queued → running atomically; None when someone else already moved it."""
    return conn.execute(
        """
        UPDATE executions
           SET status = %(running)s, started_at = now(), worker = %(worker)s,
               attempts = attempts + 1,
               queued_ms = EXTRACT(EPOCH FROM (clock_timestamp() - created_at)) * 1000
         WHERE id = %(id)s AND status = %(queued)s
        RETURNING *
        """,
        {
            "id": execution_id,
            "worker": worker,
            "running": ExecutionStatus.RUNNING,
            "queued": ExecutionStatus.QUEUED,
        },
    ).fetchone()


def requeue_execution(
    conn: psycopg.Connection[Row], *, execution_id: str, attempts: int, record: dict[str, Any]
) -> Row | None:
    """Move a lost attempt running → queued to be re-run, appending ``record`` to ``retries``.

    Only from the attempt read (``attempts``), so of the reaper and a redelivery that both
    saw the worker die, one re-queues it; None for the other.
    """
    return conn.execute(
        """
        UPDATE executions
           SET status = %(queued)s, worker = NULL, started_at = NULL, requeued_at = now(),
               retries = retries || jsonb_build_array(%(record)s::jsonb)
         WHERE id = %(id)s AND status = %(running)s AND attempts = %(attempts)s
        RETURNING *
        """,
        {
            "id": execution_id,
            "attempts": attempts,
            "record": Jsonb(record),
            "queued": ExecutionStatus.QUEUED,
            "running": ExecutionStatus.RUNNING,
        },
    ).fetchone()


def finish_execution(
    conn: psycopg.Connection[Row],
    *,
    execution_id: str,
    status: ExecutionStatus,
    result: Any = None,
    error: dict[str, Any] | None = None,
    stdout: str = "",
    stdout_truncated: bool = False,
    trace: list[dict[str, Any]] | None = None,
    duration_ms: float | None = None,
    from_statuses: tuple[ExecutionStatus, ...] = (ExecutionStatus.RUNNING,),
) -> Row | None:
    """Store the terminal state; only from the given statuses, so a finish happens once.

    The trace's summary is stored beside it (``trace_summary``), decoded here once so that
    no reader (API, audit, learning) decodes the trace again.
    """
    return conn.execute(
        """
        UPDATE executions
           SET status = %(status)s, result = %(result)s, error = %(error)s, stdout = %(stdout)s,
               stdout_truncated = %(trunc)s, trace = %(trace)s,
               trace_summary = %(summary)s, finished_at = now(),
               duration_ms = COALESCE(%(duration)s,
                   EXTRACT(EPOCH FROM (clock_timestamp() - COALESCE(started_at, created_at))) * 1000)
         WHERE id = %(id)s AND status = ANY(%(from)s)
        RETURNING *
        """,
        {
            "id": execution_id,
            "status": status,
            "result": Jsonb(result) if result is not None else None,
            "error": Jsonb(error) if error is not None else None,
            "stdout": stdout.replace("\x00", "\ufffd"),  # Postgres text cannot hold NUL
            "trunc": stdout_truncated,
            "trace": Jsonb(trace or []),
            "summary": Jsonb(summarize(trace or []).as_dict()),
            "duration": duration_ms,
            "from": list(from_statuses),
        },
    ).fetchone()
