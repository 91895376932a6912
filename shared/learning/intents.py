"""What finished executions teach search and matching: intent → tools, and capability phrasings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from shared.capabilities.aliases import add_aliases
from shared.capabilities.outcome import LearningDecision, Verdict
from shared.embeddings import Embeds, embed_cached
from shared.executions.status import ExecutionStatus
from shared.learning.capability_runs import CapabilityOutcome
from shared.search.learned import record_intents

# Outcomes whose capability existed before this run: its intent may be a new phrasing.
_ALIASED = frozenset({"updated", "rerun"})


def intent_evidence(*, status: str, decision: LearningDecision) -> tuple[list[str], list[str]]:
    """(tools that served the intent, tools that failed it): a tool serves only in a
    succeeded run and only if none of its calls failed; a failed call counts against."""
    failed = list(decision.failed_tools)
    if decision.verdict is Verdict.NOT_WANTED:  # the caller said it is not worth keeping
        return [], []
    if status != ExecutionStatus.SUCCEEDED or decision.verdict is Verdict.EMPTY_RESULT:
        return [], failed
    return [t for t in decision.tools_used if t not in failed], failed


def learn_intents(
    conn: psycopg.Connection[Any],
    *,
    rows: Sequence[Mapping[str, Any]],
    decisions: Mapping[str, LearningDecision],
    capabilities: Mapping[str, CapabilityOutcome],
    embedder: Embeds,
) -> set[str]:
    """Store each run's intent → tools evidence, and its intent as an alias of the capability it
    ran (one embedding call for the batch, cached; in the caller's transaction). The tenants
    given a run with succeeded tools (what their query adapters learn from)."""
    todo: list[tuple[Mapping[str, Any], list[str], list[str], CapabilityOutcome | None]] = []
    for row in rows:
        intent = (row["intent"] or "").strip()
        if not intent:
            continue
        execution_id = str(row["id"])
        ok, failed = intent_evidence(status=row["status"], decision=decisions[execution_id])
        done = capabilities.get(execution_id)
        aliased = done if done is not None and done.outcome in _ALIASED else None
        if ok or failed or aliased:
            todo.append((row, ok, failed, aliased))
    if not todo:
        return set()
    vectors = embed_cached(
        conn=conn, embedder=embedder, texts=[row["intent"].strip() for row, *_ in todo]
    )
    record_intents(
        conn,
        rows=[
            (row["tenant_id"], str(row["id"]), row["intent"].strip(), vector, ok, failed)
            for (row, ok, failed, _), vector in zip(todo, vectors, strict=True)
            if ok or failed
        ],
    )
    add_aliases(
        conn,
        rows=[
            (str(done.capability["id"]), row["intent"].strip(), vector)
            for (row, _, _, done), vector in zip(todo, vectors, strict=True)
            if done is not None
        ],
    )
    return {row["tenant_id"] for row, ok, _, _ in todo if ok}
