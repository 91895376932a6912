"""The audit log: who (key or user, tenant) did what, when, with which tools; arguments only as a hash.

One row per execution (written in the transaction that records it, completed with the
tools it called when it finishes), per search, and per key created or revoked. Rows are
never updated except to fill in an execution's outcome.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.executions.trace import summary_of

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

AUDIT_COLUMNS = (
    "id, created_at, tenant_id, key_id, user_id, action, execution_id, args_hash, details, status, "
    "tools, finished_at"
)


class AuditAction(StrEnum):
    """What a row records (the table's CHECK constraint lists the same names)."""

    EXECUTE = "execute"
    CAPABILITY_EXECUTE = "capability_execute"
    SEARCH = "search"
    KEY_CREATE = "key_create"
    KEY_REVOKE = "key_revoke"
    CACHE_CLEAR = "cache_clear"
    TOOL_CALL_REFUSED = "tool_call_refused"  # the toolhost refused a call outside the grant
    PII_RESOLVE = "pii_resolve"  # an admin key resolved tokens to their values
    SUBMISSION_REFUSED = "submission_refused"  # a policy refused running code or a capability
    APPROVAL_REQUESTED = "approval_requested"  # a call paused for a person's answer
    APPROVAL_DECIDED = "approval_decided"  # who approved or denied it, when and why


def args_hash(args: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces): equal arguments, equal hash."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def record_audit(
    conn: Conn,
    *,
    tenant_id: str,
    action: AuditAction | str,
    key_id: str | None = None,
    execution_id: str | None = None,
    args: Any = None,
    details: dict[str, Any] | None = None,
    user_id: str | None = None,
    hashed_args: str | None = None,
) -> int:
    """Append one row on the caller's connection (and so in its transaction); its id.
    ``hashed_args``: the arguments' ``args_hash`` when only it is at hand (sealed arguments)."""
    row = conn.execute(
        "INSERT INTO audit_log (tenant_id, key_id, user_id, action, execution_id, args_hash, "
        "details) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            tenant_id,
            key_id,
            user_id,
            str(AuditAction(action)),
            execution_id,
            args_hash(args) if args is not None else hashed_args,
            Jsonb(details or {}),
        ),
    ).fetchone()
    assert row is not None
    return int(row["id"] if isinstance(row, dict) else row[0])


# A submitted execution's audit row, written by the statement that inserts the execution
# (``shared.executions.store.create_execution``, from its ``created`` step): one round trip
# for both, and no audit row for a submission whose idempotency key found an older run.
SUBMIT_AUDIT_SQL = (
    "INSERT INTO audit_log (tenant_id, key_id, user_id, action, execution_id, args_hash, "
    "details) SELECT tenant_id, %(audit_key)s, user_id, %(audit_action)s, id, %(audit_hash)s, "
    "%(audit_details)s FROM created"
)


def submit_audit_params(
    *, action: AuditAction, key_id: str | None, args: Any, details: dict[str, Any] | None
) -> dict[str, Any]:
    """``SUBMIT_AUDIT_SQL``'s parameters (the tenant and user are the execution's own)."""
    return {
        "audit_key": key_id,
        "audit_action": str(action),
        "audit_hash": args_hash(args),
        "audit_details": Jsonb(details or {}),
    }


# An execution's audit row learns how it ended; ``finish_audit_params`` gives the parameters.
# Only its own row: the rows of its calls' approvals name the execution too.
FINISH_AUDIT_SQL = (
    "UPDATE audit_log SET status = %(audit_status)s, tools = %(audit_tools)s, "
    "finished_at = now() WHERE execution_id = %(id)s "
    "AND action IN ('execute', 'capability_execute')"
)


def finish_audit(
    conn: Conn, *, execution_id: str, status: str, trace: list[dict[str, Any]] | None
) -> None:
    """Fill an execution's row with its terminal status and each tool call's outcome."""
    conn.execute(FINISH_AUDIT_SQL, {"id": execution_id, **finish_audit_params(status, trace)})


def finish_audit_params(status: str, trace: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``FINISH_AUDIT_SQL``'s parameters but the execution's id (``id``)."""
    tools = [
        {"tool": c.tool, "ok": bool(c.ok), "error_type": c.error_type}
        for c in summary_of(trace or []).tool_calls
    ]
    return {"audit_status": str(status), "audit_tools": Jsonb(tools)}


def list_audit(conn: Conn, *, tenant_id: str | None, limit: int) -> list[Row]:
    """The newest ``limit`` rows, newest first; of one tenant, or of all when ``tenant_id`` is None."""
    if tenant_id is None:
        return conn.execute(
            f"SELECT {AUDIT_COLUMNS} FROM audit_log ORDER BY id DESC LIMIT %s", (limit,)
        ).fetchall()
    return conn.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit_log WHERE tenant_id = %s ORDER BY id DESC LIMIT %s",
        (tenant_id, limit),
    ).fetchall()
