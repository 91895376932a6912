"""Ingest one finished execution: graph edges, eager capability upsert, re-run stats. Exactly once."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.capabilities.outcome import Verdict, decide_learning
from shared.embeddings import Embedder
from shared.executions.models import TERMINAL
from shared.graph.edges import derive_edges
from shared.learning.capability_store import record_capability_run, upsert_learned_capability
from shared.learning.feedback import detect_false_negative, rerun_outcome, suggestions_for
from shared.learning.graph_store import upsert_edges

log = logging.getLogger(__name__)
Conn = psycopg.Connection[dict[str, Any]]


@dataclass
class IngestResult:
    """What one ingestion did, for logs, metrics and the execution's response."""

    outcome: str  # learned | updated | rerun | skipped | already_ingested | missing | not_finished
    verdict: str | None = None
    capability: dict[str, Any] | None = None
    edges: int = 0
    failed_tools: list[str] = field(default_factory=list)


def ingest_execution(conn: Conn, *, execution_id: str, embedder: Embedder) -> IngestResult:
    """Apply an execution's lessons inside the caller's transaction (the caller commits).

    The row is locked and stamped `learned_at` in the same transaction as the edges
    and the capability, so a redelivered message (or a worker killed mid-way, whose
    transaction rolls back) leads to exactly one application.
    """
    row = conn.execute(
        "SELECT * FROM executions WHERE id = %s FOR UPDATE", (execution_id,)
    ).fetchone()
    if row is None:
        return IngestResult(outcome="missing")
    if row["learned_at"] is not None:
        return IngestResult(outcome="already_ingested")
    if row["status"] not in TERMINAL:
        return IngestResult(outcome="not_finished")

    trace = row["trace"] or []
    decision = decide_learning(status=row["status"], intent=row["intent"], trace=trace)
    capability: dict[str, Any] | None = None
    outcome = "skipped"
    tenant_id = row["tenant_id"]
    if row["capability_id"] is not None:
        # A re-run of a matched capability: success only if the code and every tool did.
        ok = decision.verdict in (Verdict.LEARN, Verdict.NO_INTENT)
        capability = record_capability_run(
            conn,
            capability_id=str(row["capability_id"]),
            ok=ok,
            duration_ms=row["duration_ms"],
        )
        if capability is not None:
            rerun_outcome(conn, tenant_id=tenant_id, capability_name=capability["name"], ok=ok)
        outcome = "rerun"
    elif decision.learn:
        capability, created = upsert_learned_capability(
            conn,
            tenant_id=tenant_id,
            code=row["code"],
            intent=row["intent"],
            tools_used=decision.tools_used,
            duration_ms=row["duration_ms"],
            embedder=embedder,
        )
        outcome = "learned" if created else "updated"
        if created:
            detect_false_negative(
                conn,
                tenant_id=tenant_id,
                capability_id=str(capability["id"]),
                tools_used=decision.tools_used,
            )
    elif decision.verdict is Verdict.TOOL_FAILURES:
        log.info(
            "execution %s not saved as a capability: tools failed: %s",
            execution_id,
            ", ".join(decision.failed_tools),
        )

    edges = derive_edges(
        trace=trace, root_capability_id=str(capability["id"]) if capability else None
    )
    upsert_edges(conn, edges=edges)
    extras: dict[str, Any] = {
        "suggestions": suggestions_for(
            conn,
            tenant_id=tenant_id,
            execution_id=execution_id,
            used_ids=[
                *decision.tools_used,
                *([str(row["capability_id"])] if row["capability_id"] else []),
            ],
            tools=decision.tools_used,
            exclude=[str(capability["id"])] if capability else [],
        )
    }
    if capability is not None:
        extras["capability"] = _summary(capability, outcome=outcome)
    conn.execute(
        "UPDATE executions SET learned_at = now(), extras = extras || %s WHERE id = %s",
        (Jsonb(extras), execution_id),
    )
    return IngestResult(
        outcome=outcome,
        verdict=str(decision.verdict),
        capability=capability,
        edges=len(edges),
        failed_tools=decision.failed_tools,
    )


def _summary(capability: dict[str, Any], *, outcome: str) -> dict[str, Any]:
    return {
        "id": str(capability["id"]),
        "name": capability["name"],
        "status": {"learned": "created", "updated": "updated", "rerun": "reused"}.get(outcome),
        "usage_count": capability["usage_count"],
        "success_rate": capability["success_rate"],
        "parameters_schema": capability["parameters_schema"],
    }
