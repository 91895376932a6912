"""Capability matching: semantic similarity * reliability against the adaptive threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from shared.auth.patterns import compile_patterns
from shared.capabilities import store
from shared.config import DEFAULT_TENANT
from shared.db import index_scans_only
from shared.matching.availability import missing_tools, unavailable_tools
from shared.matching.thresholds import Context, get_threshold

# Score = similarity * reliability: an unreliable capability (< 50 % success) is all but
# hidden, a proven one (> 90 %) gets a boost that can lift a near-miss paraphrase.
UNRELIABLE_BELOW = 0.5
UNRELIABLE_FACTOR = 0.1
RELIABLE_ABOVE = 0.9
RELIABLE_FACTOR = 1.2
MAX_SCORE = 1.0
# HNSW candidates per false-negative lookup: the nearest is usually the new capability
# itself (excluded), and a near miss is a feedback signal, not an answer: 10 is plenty
# and a third of the default's cost.
NEAR_MISS_EF_SEARCH = 10
# Nearest neighbours fetched before re-scoring: reliability can reorder them, and a
# boosted capability a few places down the semantic list may overtake.
CANDIDATE_FACTOR = 4


def reliability_factor(success_rate: float) -> float:
    """0.1 below 50 % success, 1.2 above 90 %, else 1.0."""
    if success_rate < UNRELIABLE_BELOW:
        return UNRELIABLE_FACTOR
    if success_rate > RELIABLE_ABOVE:
        return RELIABLE_FACTOR
    return 1.0


def match_score(*, semantic: float, success_rate: float) -> float:
    """Semantic similarity * reliability, capped at 1.0."""
    return min(MAX_SCORE, semantic * reliability_factor(success_rate))


def match_capabilities(
    conn: psycopg.Connection[Any],
    *,
    intent_embedding: list[float],
    tenant_id: str = DEFAULT_TENANT,
    limit: int = 5,
    tool_patterns: Sequence[str] | None = None,
    include_out_of_scope: bool = False,
    candidates: int = 0,
    language: str | None = None,
) -> dict[str, Any]:
    """Capabilities reaching the tenant's adaptive threshold, runnable first, then best first.

    ``language`` (python or typescript; None: both) keeps only capabilities written in it.

    ``tool_patterns`` (the caller's allow-list; None: every tool) leaves out capabilities
    calling a tool outside it, unless ``include_out_of_scope``: then they follow the
    runnable ones, marked ``runnable: false``. When nothing reaches the threshold, up to
    ``candidates`` of the closest below it come back as ``candidates`` (``below_threshold``).
    """
    threshold = get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=tenant_id)
    rows = store.nearest(
        conn,
        intent_embedding=intent_embedding,
        tenant_id=tenant_id,
        n=max(limit, 1) * CANDIDATE_FACTOR,
    )
    scope = compile_patterns(tool_patterns) if tool_patterns is not None else None
    refused: dict[str, list[str]] = {}
    above: list[tuple[float, float, dict[str, Any]]] = []
    below: list[tuple[float, float, dict[str, Any]]] = []
    for row in rows:
        if language is not None and (row.get("language") or "python") != language:
            continue
        tools = list(row["tools_used"] or [])
        refused[str(row["id"])] = [t for t in tools if not scope.allows(t)] if scope else []
        if refused[str(row["id"])] and not include_out_of_scope:
            continue
        semantic = float(row["semantic"])
        score = match_score(semantic=semantic, success_rate=float(row["success_rate"]))
        (above if score >= threshold else below).append((score, semantic, row))
    closest = [] if above else sorted(below, key=_rank_key)[: max(candidates, 0)]
    unavailable = unavailable_tools(
        conn, tool_ids=(t for _, _, row in above + closest for t in (row["tools_used"] or []))
    )
    missing = {
        str(row["id"]): missing_tools(row["tools_used"], unavailable=unavailable)
        for _, _, row in above + closest
    }
    # Runnable first: one calling a tool outside the caller's allow-list would be refused,
    # and a degraded one (a tool's server is down or left the configuration) would fail
    # if run, whatever its score.
    above.sort(
        key=lambda item: (
            bool(refused[str(item[2]["id"])]),
            bool(missing[str(item[2]["id"])]),
            *_rank_key(item),
        )
    )

    def entry(score: float, semantic: float, row: dict[str, Any]) -> dict[str, Any]:
        cap_id = str(row["id"])
        out_of_scope = refused[cap_id]
        return {
            "id": cap_id,
            "name": row["name"],
            "description": row["description"],
            "intent": row["intent"],
            "code": row["code"],
            "language": row.get("language") or "python",
            "parameters_schema": row["parameters_schema"],
            "tools_used": row["tools_used"],
            "approval_tools": list(row.get("approval_tools") or []),
            "success_rate": float(row["success_rate"]),
            "usage_count": int(row["usage_count"]),
            "score": round(score, 4),
            "semantic_score": round(semantic, 4),
            "degraded": bool(missing[cap_id]),
            "missing_tools": missing[cap_id],
            "runnable": not out_of_scope,
            "out_of_scope_tools": out_of_scope,
            "not_runnable_reason": (
                f"calls tools outside this API key's allow-list: {', '.join(out_of_scope)}"
                if out_of_scope
                else None
            ),
            "below_threshold": score < threshold,
        }

    return {
        "capabilities": [entry(*item) for item in above[:limit]],
        "threshold_used": threshold,
        "total_found": len(above),
        "candidates": [entry(*item) for item in closest],
    }


def _rank_key(item: tuple[float, float, dict[str, Any]]) -> tuple[float, float, str]:
    """Best score first, then best semantic score, then id (a stable order)."""
    score, semantic, row = item
    return (-score, -semantic, str(row["id"]))


def best_below_threshold(
    conn: psycopg.Connection[Any],
    *,
    intent_embedding: list[float],
    tenant_id: str = DEFAULT_TENANT,
    min_success_rate: float = RELIABLE_ABOVE,
    exclude_ids: Sequence[str] = (),
) -> dict[str, Any] | None:
    """The closest reliable capability, for false-negative detection when new code is submitted.

    Returns {id, score, semantic_score, threshold, tools_used} when the closest
    capability with success rate ≥ ``min_success_rate`` (other than ``exclude_ids``)
    scored under the threshold, else None.
    """
    excluded = [str(i) for i in exclude_ids]
    (near,) = best_below_threshold_many(
        conn,
        queries=[(excluded, intent_embedding)],
        tenant_id=tenant_id,
        min_success_rate=min_success_rate,
    )
    return near


def best_below_threshold_many(
    conn: psycopg.Connection[Any],
    *,
    queries: Sequence[tuple[Sequence[str], list[float]]],
    tenant_id: str = DEFAULT_TENANT,
    min_success_rate: float = RELIABLE_ABOVE,
) -> list[dict[str, Any] | None]:
    """``best_below_threshold`` for many (excluded ids, intent embedding) at once, in order.

    One threshold read and one statement (an HNSW lookup per query, side by side).
    """
    if not queries:
        return []
    threshold = get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=tenant_id)
    with index_scans_only(conn, ef_search=NEAR_MISS_EF_SEARCH):
        rows = store.nearest_reliable(
            conn, queries=queries, tenant_id=tenant_id, min_success_rate=min_success_rate
        )
    out: list[dict[str, Any] | None] = [None] * len(queries)
    for row in rows:
        semantic = float(row["semantic"])
        score = match_score(semantic=semantic, success_rate=float(row["success_rate"]))
        if score < threshold:
            out[int(row["i"]) - 1] = {
                "id": str(row["id"]),
                "score": round(score, 4),
                "semantic_score": round(semantic, 4),
                "threshold": threshold,
                "tools_used": list(row["tools_used"] or []),
            }
    return out
