"""Ingest finished executions, a batch at a time: graph edges, capabilities, feedback. Exactly once.

A learning worker hands over every message it has buffered; the whole batch is
one transaction whose statements are set-based (one lock query, one stats write
per capability, one edge upsert, one suggestion query per distinct tool set), so
a thousand traces cost a few dozen round trips instead of a dozen each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.capabilities.learners import record_learners
from shared.capabilities.outcome import LearningDecision, Verdict, decide_learning
from shared.capabilities.store import add_approval_tools
from shared.embeddings import Embeds
from shared.errors import ErrorType
from shared.executions.status import TERMINAL, ExecutionStatus
from shared.executions.trace import SUMMARY_VERSION, TraceSummary, summary_of
from shared.graph.edges import Edge, derive_edges, session_edges
from shared.graph.store import upsert_edges
from shared.learning.capability_runs import (
    CapabilityOutcome,
    LearnedRun,
    Rerun,
    apply_capability_runs,
)
from shared.learning.consolidate import adapt_at_ingest
from shared.learning.feedback import (
    NewCapability,
    SuggestionRequest,
    detect_false_negatives,
    rerun_outcomes,
    suggestions_for,
)
from shared.learning.intents import learn_intents
from shared.matching.thresholds import Context, get_threshold

log = logging.getLogger(__name__)
Conn = psycopg.Connection[dict[str, Any]]

# Results that are no evidence the code did its job: {}, [], null and "".
_EMPTY = """'{}'::jsonb, '[]'::jsonb, 'null'::jsonb, '""'::jsonb"""
# What ingestion reads of an execution (not its args, result or logs; whether the result is
# empty).
# The raw trace only where no current summary is stored (rows older than migration 0017):
# summary_of decodes it then; otherwise the trace, the bulk of a row, is not read at all.
_COLUMNS = (
    "id, tenant_id, status, error, code, intent, duration_ms, capability_id, learned_at, "
    "trace_summary, learn, language, user_id, extras->'direct'->>'after' AS direct_after, "
    "extras ? 'direct' AS direct, "
    f"(result IS NULL OR result IN ({_EMPTY})) AS result_empty, "
    f"CASE WHEN trace_summary->'v' = '{SUMMARY_VERSION}'::jsonb THEN NULL ELSE trace END AS trace"
)
# Outcomes that changed nothing: no metrics, no "learned" event.
NOTHING_DONE = frozenset({"missing", "already_ingested", "not_finished"})
MATCHING = Context.CAPABILITY_MATCHING


@dataclass
class IngestResult:
    """What ingestion did to one execution, for logs, metrics and the execution's response."""

    outcome: str  # learned | updated | rerun | skipped | already_ingested | missing | not_finished
    verdict: str | None = None
    capability: dict[str, Any] | None = None
    edges: int = 0
    failed_tools: list[str] = field(default_factory=list)
    tenant_id: str | None = None
    # (old, new) adaptive matching threshold of the tenant, when this batch moved it.
    threshold_change: tuple[float, float] | None = None
    suggested: int = 0  # tools and capabilities suggested after it
    suggestions_used: int = 0  # earlier suggestions it used (accepted)
    rerun_ok: bool | None = None  # a capability re-run: did it succeed (None: not a re-run)
    # It had an intent: its evidence is what a consolidation pass reads (a direct call has
    # none, and queues no pass).
    intent: bool = False
    # A direct call (answered before it is learned from: nobody waits for its learning).
    direct: bool = False
    # A waiting response may wait for its learning (it has an intent, as the gateway's
    # ``wait._learning_pending`` reads it, and is no direct call): it gets `execution.learned`.
    awaited: bool = False


def tenants_taught(results: Mapping[str, IngestResult]) -> list[str]:
    """The tenants whose runs in a batch a consolidation pass would read: runs with an intent
    (a batch of direct calls, which have none, teaches a pass nothing)."""
    return sorted(
        {
            r.tenant_id
            for r in results.values()
            if r.tenant_id and r.intent and r.outcome not in NOTHING_DONE
        }
    )


def ingest_executions(
    conn: Conn, *, execution_ids: Sequence[str], embedder: Embeds
) -> dict[str, IngestResult]:
    """Apply the executions' lessons inside the caller's transaction (the caller commits).

    The rows are locked and stamped `learned_at` in the same transaction as the
    edges and capabilities, so a redelivered message (or a worker killed mid-way,
    whose transaction rolls back) leads to exactly one application. Duplicate ids
    in one batch are applied once.
    """
    ids = list(dict.fromkeys(execution_ids))
    rows = {
        str(r["id"]): r
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM executions WHERE id = ANY(%s::uuid[]) ORDER BY id FOR UPDATE",
            (ids,),
        ).fetchall()
    }
    results: dict[str, IngestResult] = {}
    todo: list[dict[str, Any]] = []
    for execution_id in ids:
        row = rows.get(execution_id)
        if row is None:
            results[execution_id] = IngestResult(outcome="missing")
        elif row["learned_at"] is not None:
            results[execution_id] = IngestResult(outcome="already_ingested")
        elif row["status"] not in TERMINAL:
            results[execution_id] = IngestResult(outcome="not_finished")
        else:
            todo.append(row)
    if todo:
        results.update(_apply(conn, rows=todo, embedder=embedder))
    return {execution_id: results[execution_id] for execution_id in ids}


def _apply(
    conn: Conn, *, rows: Sequence[dict[str, Any]], embedder: Embeds
) -> dict[str, IngestResult]:
    summaries = {str(r["id"]): summary_of(r) for r in rows}
    decisions: dict[str, LearningDecision] = {
        str(r["id"]): decide_learning(
            status=r["status"],
            intent=r["intent"],
            summary=summaries[str(r["id"])],
            wanted=r["learn"],
            result_empty=r["result_empty"],
        )
        for r in rows
    }
    learned: list[LearnedRun] = []
    reruns: list[Rerun] = []
    for row in rows:
        execution_id = str(row["id"])
        decision = decisions[execution_id]
        if row["capability_id"] is not None:
            if not _counts_against_capability(row, decision):
                continue  # the caller's refusal, rate limit or cancel: not the capability's
            reruns.append(
                Rerun(
                    execution_id,
                    str(row["capability_id"]),
                    _rerun_ok(decision),
                    row["duration_ms"],
                )
            )
        elif decision.learn:
            learned.append(
                LearnedRun(
                    execution_id=execution_id,
                    tenant_id=row["tenant_id"],
                    code=row["code"],
                    intent=row["intent"],
                    tools_used=decision.tools_used,
                    duration_ms=row["duration_ms"],
                    language=row.get("language") or "python",
                )
            )
        elif decision.verdict is Verdict.TOOL_FAILURES:
            log.info(
                "execution %s not saved as a capability: tools failed: %s",
                execution_id,
                ", ".join(decision.failed_tools),
                extra={"execution_id": execution_id, "tenant_id": row["tenant_id"]},
            )
    capabilities = apply_capability_runs(conn, learned=learned, reruns=reruns, embedder=embedder)
    record_learners(conn, taught=_taught(rows, capabilities))
    add_approval_tools(conn, tools_by_id=_approval_tools(rows, summaries, capabilities))
    moved = _threshold_feedback(conn, rows=rows, decisions=decisions, capabilities=capabilities)
    taught = learn_intents(
        conn, rows=rows, decisions=decisions, capabilities=capabilities, embedder=embedder
    )
    # Their query adapters learn the new runs now while that is cheap (else at the soon pass).
    adapt_at_ingest(conn, tenant_ids=taught)

    edges: dict[str, list[Edge]] = {}
    for row in rows:
        execution_id = str(row["id"])
        done = capabilities.get(execution_id)
        edges[execution_id] = derive_edges(
            summary=summaries[execution_id],
            root_capability_id=str(done.capability["id"]) if done else None,
        ) + session_edges(summary=summaries[execution_id], after=row["direct_after"])
    upsert_edges(conn, edges=[e for per_run in edges.values() for e in per_run])

    suggestions = suggestions_for(
        conn,
        requests=[_suggestion_request(row, decisions, capabilities) for row in rows],
    )
    results: dict[str, IngestResult] = {}
    extras: list[tuple[Jsonb, str]] = []
    for row in rows:
        execution_id = str(row["id"])
        decision = decisions[execution_id]
        done = capabilities.get(execution_id)
        extra: dict[str, Any] = {"suggestions": suggestions.shown[execution_id]}
        if done is not None:
            extra["capability"] = _summary(done)
        extras.append((Jsonb(extra), execution_id))
        results[execution_id] = IngestResult(
            outcome=_outcome(row, done),
            verdict=str(decision.verdict),
            capability=done.capability if done else None,
            edges=len(edges[execution_id]),
            failed_tools=decision.failed_tools,
            tenant_id=row["tenant_id"],
            threshold_change=moved.get(row["tenant_id"]),
            suggested=len(suggestions.shown[execution_id]),
            suggestions_used=suggestions.accepted[execution_id],
            rerun_ok=_rerun_ok(decision)
            if row["capability_id"] is not None and _counts_against_capability(row, decision)
            else None,
            intent=bool((row["intent"] or "").strip()),
            direct=bool(row.get("direct")),
            awaited=bool(row["intent"]) and not row.get("direct"),
        )
    # One statement for the batch (not one per run: a batch of direct calls is hundreds).
    conn.execute(
        "UPDATE executions AS e SET learned_at = now(), extras = e.extras || u.extra "
        "FROM unnest(%s::uuid[], %s::jsonb[]) AS u(id, extra) WHERE e.id = u.id",
        ([execution_id for _, execution_id in extras], [extra for extra, _ in extras]),
    )
    return results


def _threshold_feedback(
    conn: Conn,
    *,
    rows: Sequence[dict[str, Any]],
    decisions: dict[str, LearningDecision],
    capabilities: dict[str, CapabilityOutcome],
) -> dict[str, tuple[float, float]]:
    """Re-runs confirm or refute their match; new capabilities may reveal a missed one.

    Returns (old, new) threshold per tenant whose threshold this moved.
    """
    created: list[NewCapability] = []
    reruns: list[tuple[str, str, bool]] = []
    for row in rows:
        execution_id = str(row["id"])
        done = capabilities.get(execution_id)
        if done is None:
            continue
        if done.outcome == "rerun":
            reruns.append(
                (row["tenant_id"], done.capability["name"], _rerun_ok(decisions[execution_id]))
            )
        elif done.embedding is not None:
            created.append(
                NewCapability(
                    tenant_id=row["tenant_id"],
                    capability_id=str(done.capability["id"]),
                    intent_embedding=done.embedding,
                    tools_used=decisions[execution_id].tools_used,
                )
            )
    tenants = list(dict.fromkeys([t for t, _, _ in reruns] + [c.tenant_id for c in created]))
    before = {t: get_threshold(conn, context=MATCHING, tenant_id=t) for t in tenants}
    rerun_outcomes(conn, reruns=reruns)
    detect_false_negatives(conn, created=created)
    after = {t: get_threshold(conn, context=MATCHING, tenant_id=t) for t in tenants}
    return {t: (before[t], after[t]) for t in tenants if before[t] != after[t]}


# Outcomes that say something about the caller (its allow-list, its rate limits, its cancel,
# the operator's policies and the people who answer approvals), nothing about the
# capability's code: a re-run ending so is left out of the capability's stats.
CALLER_OUTCOMES = frozenset(
    {
        ErrorType.TOOL_NOT_ALLOWED,
        ErrorType.RATE_LIMITED,
        ErrorType.CANCELLED,
        ErrorType.POLICY_DENIED,
        ErrorType.APPROVAL_DENIED,
        ErrorType.APPROVAL_TIMEOUT,
    }
)


def _counts_against_capability(row: dict[str, Any], decision: LearningDecision) -> bool:
    """False for a re-run cancelled, or failed by a caller's refusal, rate limit, policy or
    approval (the run itself or any of its tool calls): those are not the capability's
    failures; nor is a run its caller said not to learn from, nor an empty result (no
    evidence of success)."""
    if row["status"] == ExecutionStatus.CANCELLED or not row["learn"]:
        return False
    if row["status"] == ExecutionStatus.SUCCEEDED and row["result_empty"]:
        return False
    error = row.get("error") or {}
    if isinstance(error, dict) and error.get("type") in CALLER_OUTCOMES:
        return False
    return not any(item.get("type") in CALLER_OUTCOMES for item in decision.tool_failures)


def _rerun_ok(decision: LearningDecision) -> bool:
    """A re-run of a matched capability succeeded only if the code and every tool did."""
    return decision.verdict in (Verdict.LEARN, Verdict.NO_INTENT)


def _suggestion_request(
    row: dict[str, Any],
    decisions: dict[str, LearningDecision],
    capabilities: dict[str, CapabilityOutcome],
) -> SuggestionRequest:
    execution_id = str(row["id"])
    tools = decisions[execution_id].tools_used
    done = capabilities.get(execution_id)
    return SuggestionRequest(
        execution_id=execution_id,
        tenant_id=row["tenant_id"],
        used_ids=[*tools, *([str(row["capability_id"])] if row["capability_id"] else [])],
        # A direct call was answered before it is learned from: nobody would be shown what
        # comes next, so nothing is suggested (nor recorded shown, which would count a later
        # use as an accepted suggestion). Its use of a tool still closes earlier suggestions.
        tools=[] if row.get("direct") else tools,
        exclude=[str(done.capability["id"])] if done else [],
    )


def _taught(
    rows: Sequence[dict[str, Any]], capabilities: dict[str, CapabilityOutcome]
) -> list[tuple[str, str]]:
    """(capability id, user id) of each person's run that created or updated a capability."""
    taught = []
    for row in rows:
        done = capabilities.get(str(row["id"]))
        if done is not None and done.outcome != "rerun" and row.get("user_id"):
            taught.append((str(done.capability["id"]), str(row["user_id"])))
    return taught


def _approval_tools(
    rows: Sequence[dict[str, Any]],
    summaries: dict[str, TraceSummary],
    capabilities: dict[str, CapabilityOutcome],
) -> dict[str, list[str]]:
    """Tools whose calls waited for approval, by the capability the run learned or re-ran
    (a re-run its stats leave out, say a cancelled one, still shows that its code needs it)."""
    out: dict[str, list[str]] = {}
    for row in rows:
        done = capabilities.get(str(row["id"]))
        capability_id = done.capability["id"] if done else row["capability_id"]
        tools = summaries[str(row["id"])].approval_tools
        if capability_id is not None and tools:
            out.setdefault(str(capability_id), []).extend(tools)
    return out


def _outcome(row: dict[str, Any], done: CapabilityOutcome | None) -> str:
    if row["capability_id"] is not None:
        return "rerun"
    return done.outcome if done else "skipped"


def _status(done: CapabilityOutcome) -> str:
    """``capability.status`` of a run's report (``CAPABILITY_STATUSES``)."""
    if done.outcome == "learned":
        return "versioned" if int(done.capability.get("version") or 1) > 1 else "created"
    return {"updated": "updated", "rerun": "reused"}[done.outcome]


def _summary(done: CapabilityOutcome) -> dict[str, Any]:
    capability = done.capability
    return {
        "id": str(capability["id"]),
        "name": capability["name"],
        "status": _status(done),
        "version": capability.get("version") or 1,
        "usage_count": capability["usage_count"],
        "success_rate": capability["success_rate"],
        "parameters_schema": capability["parameters_schema"],
    }
