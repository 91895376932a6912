"""What one ingested execution teaches the adaptive thresholds and the suggestion engine."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from shared.embeddings import vector_to_list
from shared.matching.capabilities import best_below_threshold
from shared.matching.thresholds import MIN_THRESHOLD, Context, Outcome, record_outcome
from shared.suggestions.engine import suggest
from shared.suggestions.feedback import mark_used, record_shown

log = logging.getLogger(__name__)
Conn = psycopg.Connection[dict[str, Any]]


def rerun_outcome(conn: Conn, *, tenant_id: str, capability_name: str, ok: bool) -> None:
    """A matched capability was re-run: success confirms the match, failure was a false positive."""
    record_outcome(
        conn,
        context=Context.CAPABILITY_MATCHING,
        kind=Outcome.TRUE_POSITIVE if ok else Outcome.FALSE_POSITIVE,
        tenant_id=tenant_id,
        detail=f"re-run of {capability_name} {'succeeded' if ok else 'failed'}",
    )


def detect_false_negative(
    conn: Conn, *, tenant_id: str, capability_id: str, tools_used: Sequence[str]
) -> dict[str, Any] | None:
    """New code whose intent was close to a reliable capability doing the same job: a miss.

    "Close" is at least MIN_THRESHOLD (closer than anything unrelated scores, see bench
    match) yet below the current threshold; "the same job" is a shared tool, so an
    intent that merely sounds alike does not drag the threshold down.
    """
    row = conn.execute(
        "SELECT intent_embedding FROM capabilities WHERE id = %s", (capability_id,)
    ).fetchone()
    if row is None or row["intent_embedding"] is None:
        return None
    near = best_below_threshold(
        conn,
        intent_embedding=vector_to_list(row["intent_embedding"]),
        tenant_id=tenant_id,
        exclude_ids=[capability_id],
    )
    if near is None or near["score"] < MIN_THRESHOLD:
        return None
    if not set(near["tools_used"]) & set(tools_used):
        return None
    record_outcome(
        conn,
        context=Context.CAPABILITY_MATCHING,
        kind=Outcome.FALSE_NEGATIVE,
        tenant_id=tenant_id,
        detail=f"new code matched capability {near['id']} at {near['score']:.3f}, "
        f"below the threshold {near['threshold']:.3f}",
    )
    return near


def suggestions_for(
    conn: Conn,
    *,
    tenant_id: str,
    execution_id: str,
    used_ids: Sequence[str],
    tools: Sequence[str],
    exclude: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Close earlier suggestions this run used, then suggest what usually comes next.

    `exclude` drops the capability this very run is or became: no use suggesting it back.
    """
    if used_ids:
        mark_used(conn, used_ids=list(used_ids), tenant_id=tenant_id, execution_id=execution_id)
    if not tools:
        return []
    found = [
        s
        for s in suggest(conn, context_tools=list(tools), tenant_id=tenant_id)
        if str(s["id"]) not in set(exclude)
    ]
    record_shown(conn, suggestions=found, tenant_id=tenant_id, execution_id=execution_id)
    return found
