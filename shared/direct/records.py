"""The record of one answered direct call: its executions row and audit row, as one stream entry.

A direct call runs without a sandbox and without a queued row. What must be recorded of
it (the finished execution, its audit row, learning's message) is appended to
``DIRECT_RECORDS_STREAM`` on the same round trip that announces its end, before the
answer goes out: Redis keeps it (AOF) and a drainer (``shared.direct.drain``) writes it to
Postgres. ``write_records`` is idempotent: a record written twice (a drainer that died
between its write and its acknowledgement) leaves one executions row and one audit row.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import orjson
import psycopg
from psycopg.types.json import Jsonb

from shared.auth.audit import AuditAction, args_hash, finish_audit_params
from shared.errors import ErrorType, error_dict
from shared.executions.store import finish_params
from shared.executions.trace import summarize
from shared.queues import DIRECT_RECORDS_STREAM

log = logging.getLogger(__name__)

Row = dict[str, Any]
FIELD = b"record"

# One statement: the finished execution and its audit row. A direct call made as an MCP task
# has a running row and an audit row from its start (``START_SQL``): its end fills both. A
# row already ended (the reaper ended the task ``worker_lost``) is left as it is.
WRITE_SQL = """
WITH inserted AS (
    INSERT INTO executions (id, tenant_id, status, code, args, tools, timeout_s, result, error,
                            stdout, stdout_truncated, trace, trace_summary, extras, created_at,
                            started_at, finished_at, duration_ms, queued_ms, learn, trace_id,
                            language, attempts, pii, user_id)
    VALUES (%(id)s, %(tenant)s, %(status)s, %(code)s, %(args)s, %(tools)s, %(timeout)s,
            %(result)s, %(error)s, %(stdout)s, %(trunc)s, %(trace)s, %(summary)s, %(extras)s,
            %(created)s, %(created)s, %(finished)s, %(duration)s, 0, false, %(trace_id)s,
            'python', 1, %(pii)s, %(user)s)
    ON CONFLICT (id) DO UPDATE
       SET status = EXCLUDED.status, result = EXCLUDED.result, error = EXCLUDED.error,
           trace = EXCLUDED.trace, trace_summary = EXCLUDED.trace_summary,
           extras = EXCLUDED.extras, finished_at = EXCLUDED.finished_at,
           duration_ms = EXCLUDED.duration_ms, pii = EXCLUDED.pii, worker = NULL
     WHERE executions.status = 'running'
    RETURNING id, tenant_id
),
filled AS (
    UPDATE audit_log SET status = %(audit_status)s, tools = %(audit_tools)s,
                         finished_at = %(finished)s
     WHERE execution_id IN (SELECT id FROM inserted) AND action = %(action)s
),
audited AS (
    -- (every CTE reads the table as before the statement: its own rows are not seen)
    INSERT INTO audit_log (tenant_id, key_id, user_id, action, execution_id, args_hash, details,
                           status, tools, created_at, finished_at)
    SELECT tenant_id, %(key)s, %(user)s, %(action)s, id, %(hash)s, '{}'::jsonb,
           %(audit_status)s, %(audit_tools)s, %(created)s, %(finished)s
      FROM inserted
     WHERE NOT EXISTS (SELECT 1 FROM audit_log a
                        WHERE a.execution_id = inserted.id AND a.action = %(action)s)
)
SELECT id AS execution_id FROM inserted
"""


# A direct call made as an MCP task: its row, running, and its audit row (as a submitted
# run's, written before it ends: a task whose toolhost dies is in the audit log too), written
# before its task is answered (so any replica reads the task, after any restart). ``worker``
# names its lease (``shared.executions.liveness.lease_worker``): the reaper ends it
# ``worker_lost`` once the lease lapses, filling the audit row. Its end (``write_records``)
# fills both.
START_SQL = """
WITH started AS (
    INSERT INTO executions (id, tenant_id, status, code, args, tools, timeout_s, extras,
                            created_at, started_at, queued_ms, learn, trace_id, language,
                            attempts, user_id, worker)
    VALUES (%(id)s, %(tenant)s, 'running', %(code)s, %(args)s, %(tools)s, %(timeout)s,
            %(extras)s, %(created)s, %(created)s, 0, false, %(trace_id)s, 'python', 1,
            %(user)s, %(worker)s)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, tenant_id
)
INSERT INTO audit_log (tenant_id, key_id, user_id, action, execution_id, args_hash, details,
                       created_at)
SELECT tenant_id, %(key)s, %(user)s, %(action)s, id, %(hash)s, '{}'::jsonb, %(created)s
  FROM started
"""


def write_started(
    conn: psycopg.Connection[Row],
    *,
    execution_id: str,
    tenant_id: str,
    code: str,
    args: dict[str, Any],
    tool_id: str,
    timeout_s: float,
    extras: dict[str, Any],
    created_at: float,
    trace_id: str | None,
    user_id: str | None,
    key_id: str | None,
    worker: str,
) -> None:
    """The running row and audit row of a direct call made as a task (``START_SQL``),
    committed."""
    with conn.transaction():
        conn.execute(
            START_SQL,
            {
                "id": execution_id,
                "tenant": tenant_id,
                "code": code,
                "args": Jsonb(args),
                "tools": Jsonb([tool_id]),
                "timeout": timeout_s,
                "extras": Jsonb(extras),
                "created": _utc(created_at),
                "trace_id": trace_id,
                "user": user_id,
                "worker": worker,
                "key": key_id,
                "action": str(AuditAction.EXECUTE),
                "hash": call_hash(code=code, args=args, tools=[tool_id]),
            },
        )


def finished_row(
    *,
    execution_id: str,
    tenant_id: str,
    code: str,
    args: dict[str, Any],
    tool_id: str,
    timeout_s: float,
    extras: dict[str, Any],
    created_at: float,
    finished_at: float,
    status: str,
    result: Any,
    error: dict[str, Any] | None,
    trace: list[dict[str, Any]],
    duration_ms: float,
    trace_id: str | None,
    pii: dict[str, Any] | None,
    user_id: str | None = None,
) -> Row:
    """The executions row of a finished direct call, as Postgres will hold it (and as the
    answer and a waiting client read it before it is written)."""
    created, finished = _utc(created_at), _utc(finished_at)
    return {
        "id": UUID(execution_id),
        "tenant_id": tenant_id,
        "status": status,
        "code": code,
        "intent": None,
        "args": args,
        "tools": [tool_id],
        "timeout_s": timeout_s,
        "idempotency_key": None,
        "capability_id": None,
        "result": result,
        "error": error,
        "stdout": "",
        "stdout_truncated": False,
        "trace": trace,
        "trace_summary": summarize(trace).as_dict(),
        "extras": extras,
        "worker": None,
        "created_at": created,
        "started_at": created,
        "finished_at": finished,
        "duration_ms": duration_ms,
        "queued_ms": 0.0,
        "learned_at": None,
        "retry": "never",
        "attempts": 1,
        "retries": [],
        "requeued_at": None,
        "learn": False,
        "trace_id": trace_id,
        "language": "python",
        "pii": pii,
        "user_id": user_id,  # the person who called (an OAuth token's subject), if one did
    }


def record_of(row: Row, *, key_id: str | None) -> Row:
    """The record of ``row``: its columns as JSON (times as epoch seconds) and the caller's key."""
    return {
        **{
            k: v
            for k, v in row.items()
            if k not in {"created_at", "finished_at", "started_at", "id"}
        },
        "id": str(row["id"]),
        "created": row["created_at"].timestamp(),
        "finished": row["finished_at"].timestamp(),
        "key_id": key_id,
    }


def encode_record(row: Row, *, key_id: str | None) -> bytes:
    """The stream entry's payload: ``record_of(row)`` as JSON."""
    return orjson.dumps(record_of(row, key_id=key_id))


def queue_record(pipe: Any, row: Row, *, key_id: str | None) -> None:
    """Append the record of ``row`` to the stream, on the caller's pipeline."""
    pipe.xadd(DIRECT_RECORDS_STREAM, {FIELD: encode_record(row, key_id=key_id)})


def decode_record(fields: dict[bytes, bytes]) -> Row:
    """A stream entry's record; ValueError when it is not one."""
    raw = fields.get(FIELD)
    if raw is None:
        raise ValueError("no record in the entry")
    record = orjson.loads(raw)
    if not isinstance(record, dict) or "id" not in record:
        raise ValueError("not a direct call's record")
    return record


def write_records(conn: psycopg.Connection[Row], records: Sequence[Row]) -> list[str]:
    """Write each record's execution and audit row, committed; the ids written now (a record
    already written is skipped). One transaction for them all; if one holds a value Postgres
    cannot take, each is written alone and that one is stored failed."""
    if not records:
        return []
    try:
        params = [_params(record) for record in records]
        with conn.transaction(), conn.cursor() as cur:
            # One round trip for the batch (psycopg's pipeline mode), its ids as it goes.
            cur.executemany(WRITE_SQL, params, returning=True)
            ids: list[str] = []
            while True:
                row = cur.fetchone()
                if row is not None:
                    ids.append(str(row["execution_id"]))
                if not cur.nextset():
                    return ids
    except (psycopg.DataError, ValueError):
        pass
    written: list[str] = []
    for record in records:
        try:
            with conn.transaction():
                found = _write(conn, record)
        except (psycopg.DataError, ValueError) as exc:  # a value Postgres cannot hold
            log.warning(
                "direct call %s: result not storable (%s); stored failed", record["id"], exc
            )
            with conn.transaction():
                found = _write(conn, _unstorable(record, exc))
        if found:
            written.append(found)
    return written


def _write(conn: psycopg.Connection[Row], record: Row) -> str | None:
    """The record's rows; its id when they are new."""
    found = conn.execute(WRITE_SQL, _params(record)).fetchone()
    return None if found is None else str(found["execution_id"])


def _params(record: Row) -> dict[str, Any]:
    fields = {key: record.get(key) for key in ("status", "result", "error", "trace")}
    fields["duration_ms"] = record.get("duration_ms")
    # The summary the gateway wrote with the record (an older record has none: made here).
    summary = record.get("trace_summary")
    return {
        **finish_params(
            record["id"], fields, summary=summary if isinstance(summary, dict) else None
        ),
        **finish_audit_params(record["status"], record.get("trace")),
        "tenant": record["tenant_id"],
        "code": record["code"],
        "args": Jsonb(record.get("args") or {}),
        "tools": Jsonb(record.get("tools")),
        "timeout": record["timeout_s"],
        "extras": Jsonb(record.get("extras") or {}),
        "created": _utc(record["created"]),
        "finished": _utc(record["finished"]),
        "trace_id": record.get("trace_id"),
        "pii": Jsonb(record["pii"]) if record.get("pii") else None,
        "key": record.get("key_id"),
        "user": record.get("user_id"),
        "action": str(AuditAction.EXECUTE),
        "hash": call_hash(code=record["code"], args=record.get("args"), tools=record.get("tools")),
    }


def call_hash(*, code: str, args: Any, tools: Any) -> str:
    """The audit row's hash of the call, as a submitted run's (``args_hash``)."""
    return args_hash({"code": code, "args": args, "tools": tools})


def _unstorable(record: Row, exc: Exception) -> Row:
    """The record stored as the worker stores a result Postgres cannot hold: failed."""
    return {
        **record,
        "status": "failed",
        "result": None,
        "error": error_dict(ErrorType.OUTPUT_LIMIT, f"result cannot be stored as JSON: {exc}"),
    }


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)
