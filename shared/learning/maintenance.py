"""Beat-job SQL: promotion of reliable capabilities and pruning of idle one-offs."""

from __future__ import annotations

from typing import Any

import psycopg

from shared.capabilities.stats import PROMOTION_MIN_SUCCESS_RATE, PROMOTION_MIN_USAGE

Conn = psycopg.Connection[dict[str, Any]]

# Pruning: emergent capabilities used once and untouched this long are noise.
PRUNE_IDLE_DAYS = 30


def promote_capabilities(conn: Conn) -> int:
    """Set promoted_at on capabilities used ≥ 3 times with > 70 % success; returns how many."""
    cur = conn.execute(
        """
        UPDATE capabilities SET promoted_at = now()
         WHERE promoted_at IS NULL AND usage_count >= %s AND success_rate > %s
        """,
        (PROMOTION_MIN_USAGE, PROMOTION_MIN_SUCCESS_RATE),
    )
    return cur.rowcount


def prune_idle_capabilities(conn: Conn, *, dry_run: bool) -> int:
    """Delete (or with dry_run count) emergent capabilities used once and idle 30 days."""
    where = (
        "source = 'emergent' AND usage_count <= 1 "
        "AND coalesce(last_used, created_at) < now() - make_interval(days => %s)"
    )
    if dry_run:
        row = conn.execute(
            f"SELECT count(*) AS n FROM capabilities WHERE {where}", (PRUNE_IDLE_DAYS,)
        ).fetchone()
        return int(row["n"]) if row else 0
    ids = [
        r["id"]
        for r in conn.execute(
            f"DELETE FROM capabilities WHERE {where} RETURNING id", (PRUNE_IDLE_DAYS,)
        ).fetchall()
    ]
    if ids:
        # Their graph nodes go too, so PageRank does not keep ranking deleted code.
        conn.execute(
            "DELETE FROM tool_edges WHERE src = ANY(%(n)s) OR dst = ANY(%(n)s)",
            {"n": [f"cap:{i}" for i in ids]},
        )
    return len(ids)
