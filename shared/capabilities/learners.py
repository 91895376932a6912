"""Capability provenance: the people whose runs taught a capability ("learned from runs by …")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

Conn = psycopg.Connection[dict[str, Any]]
# The most learners a capability's page lists (most runs first): provenance, not a census.
SHOWN = 20


def record_learners(conn: Conn, *, taught: Sequence[tuple[str, str]]) -> None:
    """Count each (capability id, user id) run that created or updated a capability.

    Called in the transaction that stamps the runs ``learned_at``: each run counts once.
    """
    if not taught:
        return
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO capability_learners AS l (capability_id, user_id)
            VALUES (%s, %s)
            ON CONFLICT (capability_id, user_id)
            DO UPDATE SET runs = l.runs + 1, last_run_at = now()
            """,
            sorted(taught),  # one lock order across concurrent batches
        )


def learners_of(conn: Conn, *, capability_id: str) -> list[dict[str, Any]]:
    """Who taught the capability, most runs first: user id, runs, first and last run (ISO 8601)."""
    rows = conn.execute(
        """
        SELECT user_id, runs, first_run_at, last_run_at FROM capability_learners
         WHERE capability_id = %s ORDER BY runs DESC, last_run_at DESC, user_id LIMIT %s
        """,
        (capability_id, SHOWN),
    ).fetchall()
    return [
        {
            "user_id": r["user_id"],
            "runs": r["runs"],
            "first_run_at": r["first_run_at"].isoformat(),
            "last_run_at": r["last_run_at"].isoformat(),
        }
        for r in rows
    ]
