"""Capability matching (story 7.3a): semantic similarity * reliability against the adaptive threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from shared.matching.thresholds import DEFAULT_TENANT, Context, get_threshold

# ADR-038 reliability factors: an unreliable capability (< 50 % success) is all but
# hidden, a proven one (> 90 %) gets a boost that can lift a near-miss paraphrase.
UNRELIABLE_BELOW = 0.5
UNRELIABLE_FACTOR = 0.1
RELIABLE_ABOVE = 0.9
RELIABLE_FACTOR = 1.2
MAX_SCORE = 1.0
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
) -> dict[str, Any]:
    """Capabilities whose score reaches the tenant's adaptive threshold, best first (AC5 shape)."""
    threshold = get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=tenant_id)
    rows = conn.execute(
        """
        SELECT id, name, description, intent, code, parameters_schema, success_rate,
               usage_count, tools_used, 1 - (intent_embedding <=> %(q)s) AS semantic
          FROM capabilities
         WHERE tenant_id = %(tenant)s AND intent_embedding IS NOT NULL
         ORDER BY intent_embedding <=> %(q)s
         LIMIT %(n)s
        """,
        {
            "q": np.asarray(intent_embedding, dtype=np.float32),
            "tenant": tenant_id,
            "n": max(limit, 1) * CANDIDATE_FACTOR,
        },
    ).fetchall()
    scored = []
    for row in rows:
        semantic = float(row["semantic"])
        score = match_score(semantic=semantic, success_rate=float(row["success_rate"]))
        if score >= threshold:
            scored.append((score, semantic, row))
    scored.sort(key=lambda item: (-item[0], -item[1], str(item[2]["id"])))
    return {
        "capabilities": [
            {
                "id": str(row["id"]),
                "name": row["name"],
                "description": row["description"],
                "intent": row["intent"],
                "code": row["code"],
                "parameters_schema": row["parameters_schema"],
                "tools_used": row["tools_used"],
                "success_rate": float(row["success_rate"]),
                "usage_count": int(row["usage_count"]),
                "score": round(score, 4),
                "semantic_score": round(semantic, 4),
            }
            for score, semantic, row in scored[:limit]
        ],
        "threshold_used": threshold,
        "total_found": len(scored),
    }


def best_below_threshold(
    conn: psycopg.Connection[Any],
    *,
    intent_embedding: list[float],
    tenant_id: str = DEFAULT_TENANT,
    min_success_rate: float = RELIABLE_ABOVE,
    exclude_ids: Sequence[str] = (),
) -> dict[str, Any] | None:
    """The closest reliable capability, for false-negative detection when new code is submitted.

    Returns {id, score, semantic_score, threshold} when the closest capability with
    success rate ≥ ``min_success_rate`` scored under the threshold, else None.
    """
    threshold = get_threshold(conn, context=Context.CAPABILITY_MATCHING, tenant_id=tenant_id)
    row = conn.execute(
        """
        SELECT id, success_rate, tools_used, 1 - (intent_embedding <=> %(q)s) AS semantic
          FROM capabilities
         WHERE tenant_id = %(tenant)s AND intent_embedding IS NOT NULL
           AND success_rate >= %(rate)s AND NOT (id::text = ANY(%(exclude)s))
         ORDER BY intent_embedding <=> %(q)s
         LIMIT 1
        """,
        {
            "q": np.asarray(intent_embedding, dtype=np.float32),
            "tenant": tenant_id,
            "rate": min_success_rate,
            "exclude": [str(i) for i in exclude_ids],
        },
    ).fetchone()
    if row is None:
        return None
    semantic = float(row["semantic"])
    score = match_score(semantic=semantic, success_rate=float(row["success_rate"]))
    if score >= threshold:
        return None
    return {
        "id": str(row["id"]),
        "score": round(score, 4),
        "semantic_score": round(semantic, 4),
        "threshold": threshold,
        "tools_used": list(row["tools_used"] or []),
    }
