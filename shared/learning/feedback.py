"""What one ingested execution teaches the adaptive thresholds and the suggestion engine."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from shared.matching.capabilities import best_below_threshold_many
from shared.matching.thresholds import MIN_THRESHOLD, Context, Outcome, record_outcome
from shared.suggestions.engine import suggest
from shared.suggestions.feedback import mark_used_many, record_shown_many

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


@dataclass(frozen=True)
class NewCapability:
    """A capability an ingestion just created, with what its intent was embedded as."""

    tenant_id: str
    capability_id: str
    intent_embedding: list[float]
    tools_used: list[str]


def detect_false_negatives(conn: Conn, *, created: Sequence[NewCapability]) -> int:
    """New code whose intent was close to a reliable capability doing the same job: a miss.

    "Close" is at least MIN_THRESHOLD (closer than anything unrelated scores, see bench
    match) yet below the current threshold; "the same job" is a shared tool, so an
    intent that merely sounds alike does not drag the threshold down. Returns how
    many misses were recorded.
    """
    misses = 0
    for tenant_id in dict.fromkeys(c.tenant_id for c in created):
        mine = [c for c in created if c.tenant_id == tenant_id]
        nearest = best_below_threshold_many(
            conn,
            queries=[([c.capability_id], c.intent_embedding) for c in mine],
            tenant_id=tenant_id,
        )
        for new, near in zip(mine, nearest, strict=True):
            if near is None or near["score"] < MIN_THRESHOLD:
                continue
            if not set(near["tools_used"]) & set(new.tools_used):
                continue
            record_outcome(
                conn,
                context=Context.CAPABILITY_MATCHING,
                kind=Outcome.FALSE_NEGATIVE,
                tenant_id=tenant_id,
                detail=f"new code matched capability {near['id']} at {near['score']:.3f}, "
                f"below the threshold {near['threshold']:.3f}",
            )
            misses += 1
    return misses


@dataclass(frozen=True)
class SuggestionRequest:
    """One ingested execution's part in suggestion feedback."""

    execution_id: str
    tenant_id: str
    used_ids: list[str]  # tools and capability it used: closes earlier suggestions of them
    tools: list[str]  # context for new suggestions
    exclude: list[str]  # the capability the run is or became: no use suggesting it back


def suggestions_for(conn: Conn, *, requests: Sequence[SuggestionRequest]) -> dict[str, list[Any]]:
    """Close earlier suggestions these runs used, then suggest what usually comes next.

    By execution id. The engine runs once per distinct (tenant, tools): a batch of
    runs of the same code asks one question.
    """
    mark_used_many(conn, uses=[(r.tenant_id, r.execution_id, r.used_ids) for r in requests])
    engine: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}
    out: dict[str, list[Any]] = {}
    for r in requests:
        key = (r.tenant_id, tuple(r.tools))
        if r.tools and key not in engine:
            engine[key] = suggest(conn, context_tools=r.tools, tenant_id=r.tenant_id)
        excluded = set(r.exclude)
        out[r.execution_id] = [s for s in engine.get(key, []) if str(s["id"]) not in excluded]
    record_shown_many(
        conn, shown=[(r.tenant_id, r.execution_id, out[r.execution_id]) for r in requests]
    )
    return out
