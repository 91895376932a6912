"""The tools' PageRanks in memory, for the search's weak centrality prior.

Hybrid search ranks every candidate by PageRank, including tools only the words or
the graph found; reading those from ``tools`` cost a round trip per search. PageRanks
change only when the graph refresh writes them (or tools come and go), and
``pagerank_state.version`` (migration 0007) moves with every such statement, so each
process keeps them per database and reloads when the version it reads with the
search's first statements differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from shared.versioned import VersionedCache

# Read in the search's first round trip, next to its other statements.
PAGERANK_VERSION_SQL = "SELECT version FROM pagerank_state"
# Tools without a PageRank (0: not in the graph yet) are simply absent.
_PAGERANKS_SQL = """
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(pagerank), '{}') AS ranks
  FROM tools WHERE pagerank > 0
"""


@dataclass(frozen=True)
class PageRanks:
    """Every tool's PageRank (0.0 for tools the graph does not hold)."""

    ranks: dict[str, float]

    def of(self, tool_id: str) -> float:
        return self.ranks.get(tool_id, 0.0)


def pagerank_version(cursor: psycopg.Cursor[Any]) -> Any:
    """The version from the result of ``PAGERANK_VERSION_SQL`` (dict or tuple rows)."""
    row = cursor.fetchone()
    if row is None:
        return None
    return row["version"] if isinstance(row, dict) else row[0]


def load_pageranks(conn: psycopg.Connection[Any]) -> PageRanks:
    """Every tool's PageRank, read now."""
    with conn.cursor() as cur:
        row = cur.execute(_PAGERANKS_SQL).fetchone()  # an aggregate: always one row
    assert row is not None
    ids, ranks = (row["ids"], row["ranks"]) if isinstance(row, dict) else row
    return PageRanks(ranks=dict(zip(ids, map(float, ranks), strict=True)))


# Reloaded when ``pagerank_state.version`` moves.
PAGERANKS = VersionedCache(load_pageranks)
