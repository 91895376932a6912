"""How far learning is behind: finished executions that no learning worker has ingested yet.

Read from Postgres rather than from the queue, because a stalled learning worker holds its
messages unacknowledged (the queue looks empty) and a lost message never shows in a queue
at all; ``learned_at`` is stamped in the ingestion's own transaction, so a row without it
is a run whose lesson is not applied, whatever the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from shared.executions.status import ExecutionStatus

Conn = psycopg.Connection[Any]

# Only recent rows count: an execution finished before a learning worker ever ran (or
# before an upgrade) would otherwise read as a stall forever. A day is far past any
# redelivery (the visibility timeout is minutes).
WINDOW = "1 day"

# Cache hits are recorded as executions but teach nothing new (their source run did), and
# rejected ones never ran: neither is sent to learning.
_WAITING = f"""
 WHERE learned_at IS NULL
   AND finished_at IS NOT NULL
   AND finished_at > now() - interval '{WINDOW}'
   AND status <> '{ExecutionStatus.REJECTED.value}'
   AND NOT (extras ? 'cache_hit')
"""
_LAG_SQL = f"""
SELECT count(*) AS behind,
       COALESCE(EXTRACT(EPOCH FROM now() - min(finished_at)), 0)::float8 AS oldest_s
  FROM executions {_WAITING}
"""
_UNLEARNED_SQL = f"""
SELECT id::text AS id FROM executions {_WAITING}
   AND finished_at < now() - make_interval(secs => %s)
 ORDER BY finished_at LIMIT %s
"""


@dataclass(frozen=True, slots=True)
class LearningLag:
    """Finished runs waiting for ingestion, and how long the oldest has waited."""

    behind: int
    oldest_s: float

    def stalled(self, *, after_s: float) -> bool:
        """True when a run has waited longer than ``after_s``: learning is not keeping up."""
        return self.behind > 0 and self.oldest_s > after_s


def learning_lag(conn: Conn) -> LearningLag:
    """The lag now (one index scan over the rows still waiting)."""
    row = conn.execute(_LAG_SQL).fetchone()
    assert row is not None
    return LearningLag(behind=int(row["behind"]), oldest_s=round(float(row["oldest_s"]), 1))


def unlearned(conn: Conn, *, older_than_s: float, limit: int) -> list[str]:
    """Finished runs still not learned ``older_than_s`` after they ended, oldest first."""
    rows = conn.execute(_UNLEARNED_SQL, (older_than_s, limit)).fetchall()
    return [str(row["id"]) for row in rows]
