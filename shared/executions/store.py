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
    extras: dict[str, Any] | None = None,
    user_id: str | None = None,
    audit: tuple[str, dict[str, Any]] | None = None,
    commit: bool = False,
) -> tuple[Row, bool]:
    """Insert a queued execution; with an idempotency key already used, return that row instead.

    Returns (row, created). ON CONFLICT makes two racing submissions of one key yield one row.
    ``extras`` starts the row's ``extras`` (a direct call's ``direct``: its MCP session);
    ``user_id`` is the person who submitted it (an OAuth token's subject), if one did.
    ``audit``: its audit row's statement, a step reading ``created`` (the inserted row), and
    its parameters (``shared.auth.audit.SUBMIT_AUDIT_SQL``): written by the same statement, only
    for a row it created. ``commit``: commit the transaction (in a pipeline, COMMIT goes out
    with the statement: one round trip for both).
    """
    sql = _INSERT_SQL
    audit_params: dict[str, Any] = {}
    if audit is not None:
        audit_sql, audit_params = audit
        sql = f"WITH created AS ({_INSERT_SQL}), audited AS ({audit_sql}) SELECT * FROM created"
    cursor = conn.execute(
        sql,
        {
            **request_params(
                request, tenant_id=tenant_id, timeout_s=timeout_s, cap=capability_id, user=user_id
            ),
            "extras": Jsonb(extras or {}),
            **audit_params,
        },
    )
    if commit:
        conn.commit()
    row = cursor.fetchone()
    if row is not None:
        return row, True
    existing = _by_idempotency_key(conn, tenant_id=tenant_id, key=request.idempotency_key)
    if commit:
        conn.commit()
    return existing, False


_INSERT_SQL = """
    INSERT INTO executions (tenant_id, code, intent, args, tools, timeout_s,
                            idempotency_key, capability_id, retry, learn, trace_id, language,
                            extras, user_id)
    VALUES (%(tenant)s, %(code)s, %(intent)s, %(args)s, %(tools)s, %(timeout)s, %(key)s,
            %(cap)s, %(retry)s, %(learn)s, %(trace)s, %(language)s, %(extras)s, %(user)s)
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING *
"""


def request_params(
    request: ExecutionRequest,
    *,
    tenant_id: str,
    timeout_s: float,
    cap: str | None,
    user: str | None = None,
) -> dict[str, Any]:
    """The query parameters every new execution row takes from its request (and its user)."""
    return {
        "tenant": tenant_id,
        "user": user,
        "code": request.code,
        "intent": request.intent,
        "args": Jsonb(request.args),
        "tools": Jsonb(request.tools) if request.tools is not None else None,
        "timeout": timeout_s,
        "key": request.idempotency_key,
        "cap": cap,
        "retry": request.retry,
        "learn": request.learn,
        "trace": current_trace_id(),  # the submission's trace (null when not tracing)
        "language": request.language,
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


# A listing's filter for the runs that wait for an answer (stored `running`: the status
# `waiting_approval` is what readers are shown, never stored).
WAITING_FILTER = (
    "(status = 'running' AND EXISTS (SELECT 1 FROM approvals a "
    "WHERE a.execution_id = executions.id::text AND a.status = 'pending' "
    "AND a.expires_at > now()))"
)


def _listing_filter(
    *,
    tenant_id: str,
    statuses: Sequence[str],
    error_types: Sequence[str],
    user_id: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (and its parameters) of a tenant's executions with any of ``statuses``
    and any of ``error_types`` (the stored error's ``type``); an empty list does not filter."""
    where = ["tenant_id = %(tenant)s"]
    params: dict[str, Any] = {"tenant": tenant_id}
    if statuses:
        stored = [str(s) for s in statuses if s != ExecutionStatus.WAITING_APPROVAL]
        either = ["status = ANY(%(statuses)s)"] if stored else []
        if len(stored) < len(statuses):  # shown, not stored: running with a call paused
            either.append(WAITING_FILTER)
        where.append(f"({' OR '.join(either)})")
        params["statuses"] = stored
    if error_types:
        where.append("error ->> 'type' = ANY(%(error_types)s)")
        params["error_types"] = [str(t) for t in error_types]
    if user_id is not None:
        where.append("user_id = %(user)s")
        params["user"] = user_id
    return " AND ".join(where), params


# A brief listing row: what a listing item shows, without what may be megabytes (result,
# stdout, and the submitted code and args, read with `/submission`).
_BRIEF_COLUMNS = (
    "id, tenant_id, status, intent, tools, timeout_s, idempotency_key, capability_id, error, "
    "stdout_truncated, trace, trace_summary, extras, worker, created_at, started_at, "
    "finished_at, duration_ms, queued_ms, learned_at, retry, attempts, retries, requeued_at, "
    "trace_id, user_id, mcp_task_id"
)


def list_executions(
    conn: psycopg.Connection[Row],
    *,
    tenant_id: str,
    limit: int,
    offset: int = 0,
    statuses: Sequence[str] = (),
    error_types: Sequence[str] = (),
    brief: bool = False,
    user_id: str | None = None,
) -> list[Row]:
    """A page of a tenant's executions, newest first, optionally only some statuses or error
    types (see ``_listing_filter``); ``brief`` leaves out ``result``, ``stdout``, ``code`` and
    ``args``."""
    where, params = _listing_filter(
        tenant_id=tenant_id, statuses=statuses, error_types=error_types, user_id=user_id
    )
    columns = _BRIEF_COLUMNS if brief else "*"
    return conn.execute(
        f"SELECT {columns} FROM executions WHERE {where} "
        "ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "limit": limit, "offset": offset},
    ).fetchall()


def count_executions(
    conn: psycopg.Connection[Row],
    *,
    tenant_id: str,
    statuses: Sequence[str] = (),
    error_types: Sequence[str] = (),
    user_id: str | None = None,
) -> int:
    """How many of a tenant's executions ``list_executions`` pages through with these filters."""
    where, params = _listing_filter(
        tenant_id=tenant_id, statuses=statuses, error_types=error_types, user_id=user_id
    )
    row = conn.execute(f"SELECT count(*) AS n FROM executions WHERE {where}", params).fetchone()
    return int(row["n"]) if row else 0


def execution_breakdown(conn: psycopg.Connection[Row], *, tenant_id: str) -> list[Row]:
    """A tenant's executions counted by status and error type (``error_type`` None when the
    execution has no error): which runs fail, and why, at a glance."""
    return conn.execute(
        "SELECT status, error ->> 'type' AS error_type, count(*) AS n FROM executions "
        "WHERE tenant_id = %s GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2",
        (tenant_id,),
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
    """Move queued → running atomically; None when someone else already moved it.

    The row carries, as ``tools_version``, the tools' version (migration 0027) read by the
    same statement: the run's tool rows as of its claim without a round trip of their own
    (``shared.tools.store.run_tools_at``)."""
    return conn.execute(
        """
        UPDATE executions
           SET status = %(running)s, started_at = now(), worker = %(worker)s,
               attempts = attempts + 1,
               queued_ms = EXTRACT(EPOCH FROM (clock_timestamp() - created_at)) * 1000
         WHERE id = %(id)s AND status = %(queued)s
        RETURNING *, (SELECT version FROM tools_state) AS tools_version
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


# The terminal UPDATE (no RETURNING); ``finish_params`` gives its parameters.
FINISH_SQL = """
        UPDATE executions
           SET status = %(status)s, result = %(result)s, error = %(error)s, stdout = %(stdout)s,
               stdout_truncated = %(trunc)s, trace = %(trace)s,
               trace_summary = %(summary)s, finished_at = now(),
               duration_ms = COALESCE(%(duration)s,
                   EXTRACT(EPOCH FROM (clock_timestamp() - COALESCE(started_at, created_at))) * 1000)
         WHERE id = %(id)s AND status = ANY(%(from)s)
        """


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
    fields = {
        "status": status,
        "result": result,
        "error": error,
        "stdout": stdout,
        "stdout_truncated": stdout_truncated,
        "trace": trace,
        "duration_ms": duration_ms,
    }
    params = finish_params(execution_id, fields, from_statuses=from_statuses)
    return conn.execute(FINISH_SQL + "RETURNING *", params).fetchone()


def finish_params(
    execution_id: str,
    fields: dict[str, Any],
    *,
    from_statuses: tuple[ExecutionStatus, ...] = (ExecutionStatus.RUNNING,),
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``FINISH_SQL``'s parameters from ``fields`` (``finish_execution``'s keywords: status,
    and optionally result, error, stdout, stdout_truncated, trace, duration_ms); ``summary``:
    the trace's summary when the caller has it already (else it is summarised here)."""
    result, error, trace = fields.get("result"), fields.get("error"), fields.get("trace")
    if summary is None:
        summary = summarize(trace or []).as_dict()
    return {
        "id": execution_id,
        "status": fields["status"],
        "result": Jsonb(result) if result is not None else None,
        "error": Jsonb(error) if error is not None else None,
        "stdout": fields.get("stdout", "").replace("\x00", "\ufffd"),  # no NUL in Postgres text
        "trunc": fields.get("stdout_truncated", False),
        "trace": Jsonb(trace or []),
        "summary": Jsonb(summary),
        "duration": fields.get("duration_ms"),
        "from": list(from_statuses),
    }
