"""Suggestion feedback: record what was shown, mark it used when a later run uses it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg

from shared.config import DEFAULT_TENANT
from shared.matching.thresholds import Context, Outcome, record_outcomes

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
    return record_shown_many(conn, shown=[(tenant_id, execution_id, suggestions)])


def record_shown_many(
    conn: psycopg.Connection[Any],
    *,
    shown: Sequence[tuple[str, str | None, Sequence[dict[str, Any]]]],
) -> int:
    """``record_shown`` for many (tenant, execution id, suggestions) at once."""
    rows = [
        (tenant_id, execution_id, s["type"], str(s["id"]), float(s["score"]), s["reason"])
        for tenant_id, execution_id, suggestions in shown
        for s in suggestions
    ]
    if rows:
        columns = list(zip(*rows, strict=True))
        conn.execute(
            "INSERT INTO suggestion_feedback (tenant_id, execution_id, kind, suggested_id, "
            "score, reason) SELECT * FROM unnest(%s::text[], %s::uuid[], %s::text[], "
            "%s::text[], %s::float8[], %s::text[])",
            [list(c) for c in columns],
        )
    return len(rows)


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
    return mark_used_many(conn, uses=[(tenant_id, execution_id, used_ids)])


def mark_used_many(
    conn: psycopg.Connection[Any],
    *,
    uses: Sequence[tuple[str, str | None, Sequence[str]]],
) -> int:
    """``mark_used`` for many (tenant, execution id, used ids) at once: one UPDATE."""
    return sum(mark_used_by_execution(conn, uses=uses).values())


def mark_used_by_execution(
    conn: psycopg.Connection[Any],
    *,
    uses: Sequence[tuple[str, str | None, Sequence[str]]],
) -> Counter[str | None]:
    """``mark_used_many``, counting the suggestions marked used by each using execution."""
    pairs = [
        (tenant_id, execution_id, str(used))
        for tenant_id, execution_id, used_ids in uses
        for used in used_ids
    ]
    if not pairs:
        return Counter()
    rows = conn.execute(
        """
        UPDATE suggestion_feedback AS f SET used = true
          FROM unnest(%(tenants)s::text[], %(executions)s::uuid[], %(ids)s::text[])
               AS u(tenant_id, execution_id, id)
         WHERE f.tenant_id = u.tenant_id AND f.used IS NULL AND f.suggested_id = u.id
           AND f.created_at > now() - make_interval(secs => %(window)s)
           AND (u.execution_id IS NULL OR f.execution_id IS DISTINCT FROM u.execution_id)
        RETURNING f.tenant_id, f.kind, u.execution_id::text AS used_by
        """,
        {
            "tenants": [p[0] for p in pairs],
            "executions": [p[1] for p in pairs],
            "ids": [p[2] for p in pairs],
            "window": USE_WINDOW_S,
        },
    ).fetchall()
    used_capabilities: dict[str, int] = {}
    for row in rows:
        if row["kind"] == "capability":
            tenant = row["tenant_id"]
            used_capabilities[tenant] = used_capabilities.get(tenant, 0) + 1
    for tenant, count in used_capabilities.items():
        record_outcomes(
            conn,
            context=Context.SUGGESTIONS,
            outcomes=[(Outcome.TRUE_POSITIVE, "suggested capability was used")] * count,
            tenant_id=tenant,
        )
    return Counter(row["used_by"] for row in rows)
