"""The ``approvals`` table: a paused call opened by the toolhost, answered by an approver,
redeemed once by the toolhost that runs it.

Every transition happens under the row's lock (``SELECT … FOR UPDATE``), so two answers at
once (two gateways) leave exactly one in force, and an approved call is moved to
``executed`` by exactly one redemption: the call runs once whoever retries.

The call's arguments are the real values (the privacy layer put them back in place of its
tokens), so the row keeps them sealed (``shared/privacy/sealed.py``: AES-GCM under the PII
key, bound to the tenant and the approval) and only ``pending_view`` opens them, for the
people who are shown the question. Comparing a call sent again needs only ``args_hash``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.auth.audit import AuditAction, args_hash, record_audit
from shared.auth.grants import Grant
from shared.errors import ApprovalClosed, Forbidden, NotFound
from shared.policy.source import ApprovalRule
from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import open_bound, seal_bound

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

COLUMNS = (
    "execution_id, call_id, tenant_id, tool, args, args_hash, surface, policies, approvers, "
    "caller_key, caller_user, status, decided_by, reason, created_at, expires_at, decided_at, "
    "executed_at"
)
PENDING, APPROVED, DENIED, EXPIRED, EXECUTED = (
    "pending",
    "approved",
    "denied",
    "expired",
    "executed",
)
ARGS_LABEL = b"approval-args"


def open_approval(
    conn: Conn,
    keys: PiiKeys,
    *,
    execution_id: str,
    call_id: str,
    tool: str,
    args: dict[str, Any],
    grant: Grant,
    rule: ApprovalRule,
    timeout_s: int,
) -> Row:
    """The call's approval, opened ``pending`` (and audited) unless it exists: then as it is
    (a retried request asks once). A new row has ``opened`` true."""
    sealed = seal_args(
        keys, tenant_id=grant.tenant_id, execution_id=execution_id, call_id=call_id, args=args
    )
    row = conn.execute(
        "INSERT INTO approvals (execution_id, call_id, tenant_id, tool, args, args_hash, "
        "surface, policies, approvers, caller_key, caller_user, expires_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s)) "
        "ON CONFLICT (execution_id, call_id) DO NOTHING "
        f"RETURNING {COLUMNS}",
        (
            execution_id, call_id, grant.tenant_id, tool, Jsonb(sealed), args_hash(args),
            grant.surface, Jsonb(list(rule.policies)), Jsonb(list(rule.approvers)),
            grant.key_id, grant.user, timeout_s,
        ),
    ).fetchone()  # fmt: skip
    if row is None:
        found = _locked(conn, execution_id, call_id)
        assert found is not None  # the conflict's row; approvals are never deleted
        return {**found, "opened": False}
    record_audit(
        conn,
        tenant_id=grant.tenant_id,
        key_id=grant.key_id,
        user_id=grant.user,
        action=AuditAction.APPROVAL_REQUESTED,
        execution_id=_uuid_or_none(execution_id),
        args=args,
        details={"tool": tool, "call_id": call_id, "policies": list(rule.policies)},
    )
    return {**row, "opened": True}


@dataclass(frozen=True, slots=True)
class Redemption:
    """What the toolhost may do with a paused call now: ``run`` it (this redemption moved it
    to executed), or not, with the row saying why (pending, denied, expired, executed)."""

    run: bool
    status: str
    row: Row | None


def redeem(conn: Conn, *, execution_id: str, call_id: str, args: dict[str, Any]) -> Redemption:
    """Take an approved call for running (once: it becomes ``executed``); a pending one past
    its time becomes ``expired``. The arguments must be the ones approved."""
    row = _locked(conn, execution_id, call_id)
    if row is None:
        return Redemption(False, "unknown", None)
    status = row["status"]
    if status == APPROVED and row["args_hash"] == args_hash(args):
        conn.execute(
            "UPDATE approvals SET status = 'executed', executed_at = now() "
            "WHERE execution_id = %s AND call_id = %s",
            (execution_id, call_id),
        )
        return Redemption(True, EXECUTED, row)
    if status == APPROVED:  # approved, but not for these arguments
        return Redemption(False, "changed", row)
    if status == PENDING and _expired(conn, row):
        conn.execute(
            "UPDATE approvals SET status = 'expired', decided_at = now() "
            "WHERE execution_id = %s AND call_id = %s",
            (execution_id, call_id),
        )
        return Redemption(False, EXPIRED, {**row, "status": EXPIRED})
    return Redemption(False, status, row)


def decide(
    conn: Conn,
    *,
    tenant_id: str,
    execution_id: str,
    call_id: str,
    approve: bool,
    reason: str | None,
    by: str,
    refusal: Callable[[Row], str | None],
    key_id: str | None = None,
    user_id: str | None = None,
) -> Row:
    """Answer a pending approval (and audit who, when and why); NotFound for no such approval
    in the tenant, ``refusal(row)`` raised as Forbidden by the caller's check, ApprovalClosed
    when it was answered already, expired or its run ended."""
    row = _locked(conn, execution_id, call_id)
    if row is None or row["tenant_id"] != tenant_id:
        raise NotFound(
            f"execution {execution_id!r} has no approval for call {call_id!r}",
            execution_id=execution_id,
            call_id=call_id,
        )
    why = refusal(row)
    if why is not None:
        raise Forbidden(f"you may not answer this approval: {why}", call_id=call_id)
    if row["status"] != PENDING and row["decided_by"] == CLOSED_BY:
        raise ApprovalClosed(
            f"approval {call_id!r} is closed ({row['reason']}); nothing will run the call",
            status="abandoned",
        )
    if row["status"] != PENDING:
        raise ApprovalClosed(
            f"approval {call_id!r} is {row['status']}"
            + (f" (by {row['decided_by']})" if row["decided_by"] else "")
            + "; the first answer stands",
            status=row["status"],
        )
    if _expired(conn, row) or _run_over(conn, execution_id):
        raise ApprovalClosed(
            f"approval {call_id!r} is no longer open: "
            + ("its time ran out" if _expired(conn, row) else "its run has ended"),
            status=EXPIRED,
        )
    decided = conn.execute(
        "UPDATE approvals SET status = %s, decided_by = %s, reason = %s, decided_at = now() "
        f"WHERE execution_id = %s AND call_id = %s RETURNING {COLUMNS}",
        (APPROVED if approve else DENIED, by, reason, execution_id, call_id),
    ).fetchone()
    assert decided is not None
    record_audit(
        conn,
        tenant_id=tenant_id,
        key_id=key_id,
        user_id=user_id,
        action=AuditAction.APPROVAL_DECIDED,
        execution_id=_uuid_or_none(execution_id),
        hashed_args=row["args_hash"],  # the arguments stay sealed
        details={
            "tool": row["tool"],
            "call_id": call_id,
            "decision": "approve" if approve else "deny",
            "by": by,
            "reason": reason,
        },
    )
    return decided


# Who closes an approval whose call can no longer run (``close_unrun``), as answers name people.
CLOSED_BY = "agentcards"


def close_unrun(conn: Conn, *, execution_id: str, call_id: str, why: str) -> Row | None:
    """Close a paused call nothing will run any more (its caller is gone): pending, or
    approved but never sent, it becomes ``expired`` (closed by ``CLOSED_BY``, the reason
    saying why; the status needs no new value) and is audited as decided; None when it was
    settled already (answered and run, denied, expired)."""
    row = _locked(conn, execution_id, call_id)
    if row is None or row["status"] not in (PENDING, APPROVED):
        return None
    reason = f"abandoned: {why}"
    closed = conn.execute(
        "UPDATE approvals SET status = 'expired', decided_by = %s, reason = %s, "
        f"decided_at = now() WHERE execution_id = %s AND call_id = %s RETURNING {COLUMNS}",
        (CLOSED_BY, reason, execution_id, call_id),
    ).fetchone()
    record_audit(
        conn,
        tenant_id=row["tenant_id"],
        key_id=row["caller_key"],
        user_id=row["caller_user"],
        action=AuditAction.APPROVAL_DECIDED,
        execution_id=_uuid_or_none(execution_id),
        hashed_args=row["args_hash"],
        details={
            "tool": row["tool"],
            "call_id": call_id,
            "decision": "abandoned",
            "by": CLOSED_BY,
            "reason": reason,
            "was": row["status"],
        },
    )
    return closed


def close_run_approvals(conn: Conn, *, execution_id: str, status: str) -> int:
    """Close the run's paused calls still open after it ended ``status`` (``close_unrun``
    each): how many were. Both ends of a run call it: its worker's (the ``approvals.close``
    stage) and the reaper's (``shared.recovery.lost.settle_ended``)."""
    why = f"its run ended ({status}) while the call waited"
    open_ids = conn.execute(
        "SELECT call_id FROM approvals WHERE execution_id = %s "
        "AND status IN ('pending', 'approved')",
        (execution_id,),
    ).fetchall()
    closed = [
        close_unrun(conn, execution_id=execution_id, call_id=row["call_id"], why=why)
        for row in open_ids
    ]
    return sum(1 for row in closed if row is not None)


def status_of(conn: Conn, *, tenant_id: str, execution_id: str, call_id: str) -> str | None:
    """The approval's status in the tenant (None: there is none)."""
    row = conn.execute(
        "SELECT status FROM approvals WHERE execution_id = %s AND call_id = %s AND tenant_id = %s",
        (execution_id, call_id, tenant_id),
    ).fetchone()
    return None if row is None else str(row["status"])


def pending_of_executions(conn: Conn, execution_ids: list[str]) -> dict[str, list[Row]]:
    """Each execution's calls waiting for an answer, oldest first (only those with any)."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM approvals WHERE execution_id = ANY(%s) AND status = 'pending' "
        "AND expires_at > now() ORDER BY created_at",
        (execution_ids,),
    ).fetchall()
    found: dict[str, list[Row]] = {}
    for row in rows:
        found.setdefault(str(row["execution_id"]), []).append(row)
    return found


def pending_of_tenant(conn: Conn, tenant_id: str, *, limit: int = 100) -> list[Row]:
    """The tenant's calls waiting for an answer, oldest first (the approvals inbox), each
    with the name of the key that made it (``caller_key_name``; None for a person's call)."""
    return list(
        conn.execute(
            f"SELECT {COLUMNS}, (SELECT k.name FROM api_keys k "
            "WHERE k.id::text = approvals.caller_key) AS caller_key_name "
            "FROM approvals WHERE tenant_id = %s AND status = 'pending' "
            "AND expires_at > now() ORDER BY created_at LIMIT %s",
            (tenant_id, limit),
        ).fetchall()
    )


def pending_view(row: Row, keys: PiiKeys) -> dict[str, Any]:
    """A pending approval as readers see it (REST, MCP, SSE, the dashboard), its arguments
    opened (None when they were sealed with a key this stack no longer has)."""
    server, _, tool = str(row["tool"]).partition(":")
    return {
        "execution_id": str(row["execution_id"]),
        "call_id": row["call_id"],
        "server": server,
        "tool": tool,
        "args": _opened_args(row, keys),
        "policies": row["policies"],
        "approvers": row["approvers"],
        "expires_at": row["expires_at"].isoformat(),
    }


def seal_args(
    keys: PiiKeys, *, tenant_id: str, execution_id: str, call_id: str, args: dict[str, Any]
) -> str:
    """The call's arguments as the row keeps them: sealed, opening only for this approval."""
    aad = _args_aad(tenant_id, execution_id, call_id)
    return seal_bound(keys, label=ARGS_LABEL, aad=aad, value=json.dumps(args))


def _args_aad(tenant_id: str, execution_id: str, call_id: str) -> bytes:
    return f"{tenant_id}\x00{execution_id}\x00{call_id}".encode()


def _opened_args(row: Row, keys: PiiKeys) -> dict[str, Any] | None:
    aad = _args_aad(row["tenant_id"], str(row["execution_id"]), row["call_id"])
    plain = open_bound(keys, label=ARGS_LABEL, aad=aad, value=str(row["args"]))
    if plain is None:
        return None
    opened: dict[str, Any] = json.loads(plain)
    return opened


def _locked(conn: Conn, execution_id: str, call_id: str) -> Row | None:
    row: Row | None = conn.execute(
        f"SELECT {COLUMNS} FROM approvals WHERE execution_id = %s AND call_id = %s FOR UPDATE",
        (execution_id, call_id),
    ).fetchone()
    return row


def _expired(conn: Conn, row: Row) -> bool:
    found = conn.execute("SELECT %s <= now() AS over", (row["expires_at"],)).fetchone()
    return bool(found and (found["over"] if isinstance(found, dict) else found[0]))


def _run_over(conn: Conn, execution_id: str) -> bool:
    """Whether the approval's run has ended (no run row yet: a direct call, still waiting)."""
    if _uuid_or_none(execution_id) is None:
        return False
    found = conn.execute("SELECT status FROM executions WHERE id = %s", (execution_id,)).fetchone()
    if found is None:
        return False
    status = found["status"] if isinstance(found, dict) else found[0]
    return status not in ("queued", "running")


def _uuid_or_none(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
