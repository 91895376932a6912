"""One tenant's recent activity, for the dashboard's metrics strip: runs, outcomes, capabilities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from shared.executions.status import TERMINAL, ExecutionStatus


@dataclass(frozen=True)
class Activity:
    """Counts over two windows: submissions (rate) and ended runs (outcomes)."""

    submitted: int  # executions created in the rate window (cache hits included)
    ended: int  # executions created in the outcome window that have ended
    succeeded: int  # of those, the ones that succeeded
    capabilities: int  # the tenant's capabilities now (a capability's versions count once)


def tenant_activity(
    conn: psycopg.Connection[dict[str, Any]],
    *,
    tenant_id: str,
    rate_window_s: float,
    outcome_window_s: float,
) -> Activity:
    """Two indexed reads (executions by tenant and creation time; capabilities by tenant)."""
    widest = max(rate_window_s, outcome_window_s)
    row = conn.execute(
        """
        SELECT count(*) FILTER (WHERE created_at > now() - make_interval(secs => %(rate)s))
                   AS submitted,
               count(*) FILTER (WHERE created_at > now() - make_interval(secs => %(outcome)s)
                                  AND status = ANY(%(terminal)s)) AS ended,
               count(*) FILTER (WHERE created_at > now() - make_interval(secs => %(outcome)s)
                                  AND status = %(succeeded)s) AS succeeded
          FROM executions
         WHERE tenant_id = %(tenant)s AND created_at > now() - make_interval(secs => %(widest)s)
        """,
        {
            "tenant": tenant_id,
            "rate": rate_window_s,
            "outcome": outcome_window_s,
            "widest": widest,
            "terminal": [str(s) for s in TERMINAL],
            "succeeded": str(ExecutionStatus.SUCCEEDED),
        },
    ).fetchone()
    caps = conn.execute(
        "SELECT count(DISTINCT coalesce(family_id, id)) AS n FROM capabilities WHERE tenant_id = %s",
        (tenant_id,),
    ).fetchone()
    assert row is not None and caps is not None  # aggregates always return one row
    return Activity(
        submitted=int(row["submitted"]),
        ended=int(row["ended"]),
        succeeded=int(row["succeeded"]),
        capabilities=int(caps["n"]),
    )
