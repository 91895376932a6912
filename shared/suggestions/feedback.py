"""Suggestion feedback: record what was shown, mark it used when a later run uses it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from shared.matching.thresholds import DEFAULT_TENANT, Context, Outcome, record_outcome

# A suggestion counts as used only if the use comes soon after it was shown; later
# uses say nothing about the suggestion.
USE_WINDOW_S = 3600


def record_shown(
    conn: psycopg.Connection[Any],
    *,
    suggestions: Sequence[dict[str, Any]],
    tenant_id: str = DEFAULT_TENANT,
    execution_id: str | None = None,
) -> int:
    """One `suggestion_feedback` row per suggestion shown (used unknown yet); the caller commits."""
    if not suggestions:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO suggestion_feedback (tenant_id, execution_id, kind, suggested_id, "
            "score, reason) VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (tenant_id, execution_id, s["type"], str(s["id"]), float(s["score"]), s["reason"])
                for s in suggestions
            ],
        )
    return len(suggestions)


def mark_used(
    conn: psycopg.Connection[Any],
    *,
    used_ids: Sequence[str],
    tenant_id: str = DEFAULT_TENANT,
    execution_id: str | None = None,
) -> int:
    """Mark recent open suggestions of these tool/capability ids as used; the caller commits.

    A used capability suggestion is a true positive for the `suggestions` threshold.
    Suggestions shown for the same execution that is now using them do not count.
    """
    if not used_ids:
        return 0
    rows = conn.execute(
        """
        UPDATE suggestion_feedback SET used = true
         WHERE tenant_id = %(tenant)s AND used IS NULL AND suggested_id = ANY(%(ids)s)
           AND created_at > now() - make_interval(secs => %(window)s)
           AND (%(execution)s::uuid IS NULL OR execution_id IS DISTINCT FROM %(execution)s::uuid)
        RETURNING kind
        """,
        {
            "tenant": tenant_id,
            "ids": [str(i) for i in used_ids],
            "window": USE_WINDOW_S,
            "execution": execution_id,
        },
    ).fetchall()
    for row in rows:
        if row["kind"] == "capability":
            record_outcome(
                conn,
                context=Context.SUGGESTIONS,
                kind=Outcome.TRUE_POSITIVE,
                tenant_id=tenant_id,
                detail="suggested capability was used",
            )
    return len(rows)
