"""An agent's verdict on one of its runs after the fact: ``ok: false`` takes it back as evidence.

A run reported wrong before it was learned from is never learned from (``learn`` is cleared
under the row lock ingestion takes too). One already learned from is undone: the capability
it alone created is deleted; a capability it counted as a success for counts it as a failure;
its intent → tools evidence and the cached results it left are dropped. ``ok: true`` is
recorded only. Reporting the same verdict again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import redis
from psycopg.types.json import Jsonb

from shared.cache import entries
from shared.capabilities.outcome import CREATED_STATUSES
from shared.errors import Conflict, NotFound
from shared.executions.status import TERMINAL, ExecutionStatus

Conn = psycopg.Connection[dict[str, Any]]


@dataclass(frozen=True)
class Verdict:
    """What the agent said of the run."""

    ok: bool
    reason: str | None = None


def report(
    conn: Conn, client: redis.Redis, *, tenant_id: str, execution_id: str, verdict: Verdict
) -> dict[str, Any]:
    """Record the verdict (in the caller's transaction, for it to commit) and undo what a wrong
    run taught; ``{"execution_id", "ok", "reason", "capability"}`` where ``capability`` says
    what became of the capability it taught (``{"id", "name", "action"}``) or is None."""
    try:
        UUID(execution_id)
    except ValueError:
        raise NotFound(f"no execution {execution_id!r}", id=execution_id) from None
    row = conn.execute(
        "SELECT id, status, learn, learned_at, capability_id, extras, "
        "(result IS NULL OR result IN ('{}'::jsonb, '[]'::jsonb, 'null'::jsonb, '\"\"'::jsonb)) "
        "AS result_empty FROM executions WHERE id = %s AND tenant_id = %s FOR UPDATE",
        (execution_id, tenant_id),
    ).fetchone()
    if row is None:
        raise NotFound(f"no execution {execution_id!r}", id=execution_id)
    if row["status"] not in TERMINAL:
        raise Conflict(
            f"execution {execution_id} is {row['status']}: report it once it has finished",
            status=row["status"],
        )
    extras = dict(row["extras"] or {})
    before = extras.get("feedback") or {}
    answer: dict[str, Any] = {"execution_id": str(row["id"]), "ok": verdict.ok,
                              "reason": verdict.reason, "capability": before.get("capability")}  # fmt: skip
    if before.get("ok") is verdict.ok:
        return answer | {"reason": before.get("reason")}  # said already: nothing changes twice
    undone = None
    if not verdict.ok and row["learn"]:
        undone = _unteach(conn, client, row=row, tenant_id=tenant_id)
        answer["capability"] = undone
    feedback = {"ok": verdict.ok, "reason": verdict.reason, "capability": answer["capability"]}
    conn.execute(
        "UPDATE executions SET extras = extras || %s, learn = learn AND %s WHERE id = %s",
        (Jsonb({"feedback": feedback}), verdict.ok, row["id"]),
    )
    return answer


def _unteach(
    conn: Conn, client: redis.Redis, *, row: dict[str, Any], tenant_id: str
) -> dict[str, Any] | None:
    """Undo a learned run's lessons; what became of its capability (None: it taught none)."""
    if row["learned_at"] is None:
        return None  # ingestion will find learn cleared and skip it
    execution_id = str(row["id"])
    conn.execute("DELETE FROM intent_tools WHERE execution_id = %s", (row["id"],))
    conn.execute("DELETE FROM capability_cache WHERE source_execution_id = %s", (row["id"],))
    entries.delete_from_source(client, tenant_id=tenant_id, execution_id=execution_id)
    taught = (row["extras"] or {}).get("capability") or {}
    counted = row["status"] == ExecutionStatus.SUCCEEDED and not row["result_empty"]
    if not taught.get("id") or not counted:
        return None
    cap = conn.execute(
        "SELECT id, name, usage_count, success_count FROM capabilities "
        "WHERE id::text = %s AND tenant_id = %s FOR UPDATE",
        (taught["id"], tenant_id),
    ).fetchone()
    if cap is None:
        return None
    if taught.get("status") in CREATED_STATUSES and cap["usage_count"] <= 1:
        conn.execute("DELETE FROM capabilities WHERE id = %s", (cap["id"],))
        return {"id": str(cap["id"]), "name": cap["name"], "action": "deleted"}
    conn.execute(
        """
        UPDATE capabilities
           SET success_count = greatest(success_count - 1, 0),
               failure_count = failure_count + 1,
               success_rate = greatest(success_count - 1, 0)::float / greatest(usage_count, 1),
               updated_at = now()
         WHERE id = %s
        """,
        (cap["id"],),
    )
    return {"id": str(cap["id"]), "name": cap["name"], "action": "counted_as_failure"}
