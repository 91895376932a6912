"""Learned tool votes: a query's nearest past intents (per tenant) vote for the tools they used.

Every finished execution with an intent leaves a row in ``intent_tools`` (migration
0011): its intent's embedding, the tools whose calls succeeded in a succeeded run and
the tools whose calls failed. A search reads the nearest rows in its first round trip
(one more HNSW statement in the same pipeline) and each row votes: + for its
succeeded tools, - for its failed ones, weighted by how close the intent is and how
recent the run. No training job: one execution is evidence for the next search.

The vote is a nearest-neighbour classifier whose say grows with closeness: an intent's
weight is its closeness to the query squared (0 at MIN_SIMILARITY, 0.16 at 0.7, 0.64 at
0.9, 1 for the same request), so a repeat or close paraphrase of a past request decides
the ranking while a merely related one (0.5-0.65, where on the bench's sets the nearest
past request used another tool more often than not) hardly moves it. Several close
intents that agree add up; when nothing close was run every vote is 0 and the ranking
is exactly the zero-shot one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg

NEIGHBOURS = 20  # past intents read per search; more add only far, weak votes
# MiniLM puts paraphrases of one request at 0.6-0.9 and unrelated requests at 0.0-0.4;
# an intent below this says nothing about the query and does not vote.
MIN_SIMILARITY = 0.5
HALF_LIFE_DAYS = 30.0  # a run's vote halves every month: tools and habits change
# Closeness is raised to this power: on `bench search`'s tuning requests a past request at
# 0.5-0.65 used the query's tool in ~1 case of 4 on the real servers' set (read vs write
# the same thing), so only close intents may weigh much.
CLOSENESS_POWER = 2.0

# The nearest past intents of the tenant. pgvector 0.6's HNSW filters the tenant after
# the scan (up to hnsw.ef_search rows, which the search raises to its candidate count),
# so a tenant holding a small share of a shared table can see fewer than NEIGHBOURS.
NEAREST_INTENTS_SQL = """
SELECT 1 - (intent_embedding <=> %(v)s) AS sim, tools_ok, tools_failed,
       extract(epoch FROM now() - created_at) / 86400.0 AS age_days
  FROM intent_tools
 WHERE tenant_id = %(tenant)s
 ORDER BY intent_embedding <=> %(v)s
 LIMIT %(n)s
"""


def nearest_intents_query(*, vector: np.ndarray, tenant_id: str) -> tuple[str, dict[str, Any]]:
    """The statement (and its parameters) reading a query's nearest past intents."""
    return NEAREST_INTENTS_SQL, {"v": vector, "tenant": tenant_id, "n": NEIGHBOURS}


def intent_weight(*, similarity: float, age_days: float) -> float:
    """How much one past intent counts: 0 at MIN_SIMILARITY, 1 for the same intent (closeness
    squared in between), halved per HALF_LIFE_DAYS of age."""
    if similarity <= MIN_SIMILARITY:
        return 0.0
    closeness = min(1.0, (similarity - MIN_SIMILARITY) / (1.0 - MIN_SIMILARITY))
    return closeness**CLOSENESS_POWER * 0.5 ** (max(0.0, age_days) / HALF_LIFE_DAYS)


def tool_votes(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per tool, Σ weight * (+1 succeeded, -1 failed) / max(1, Σ weight), in [-1, 1].

    Dividing by the total weight (at least 1) keeps a tool's vote its share of the close
    evidence when many intents agree (agreement), and leaves a single close intent's vote
    its weight (closeness): one run of the same request votes 1, two runs at 0.8 vote 0.72.
    """
    votes: dict[str, float] = {}
    total = 0.0
    for row in rows:
        weight = intent_weight(similarity=float(row["sim"]), age_days=float(row["age_days"]))
        if weight <= 0:
            continue
        total += weight
        for tool in row["tools_ok"] or []:
            votes[tool] = votes.get(tool, 0.0) + weight
        for tool in row["tools_failed"] or []:
            votes[tool] = votes.get(tool, 0.0) - weight
    scale = max(1.0, total)
    return {tool: vote / scale for tool, vote in votes.items() if vote}


def record_intents(
    conn: psycopg.Connection[Any],
    *,
    rows: Sequence[tuple[str, str, str, Sequence[float], Sequence[str], Sequence[str]]],
) -> None:
    """Store (tenant, execution id, intent, embedding, succeeded tools, failed tools) rows;
    an execution already stored is skipped (redelivery)."""
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO intent_tools (tenant_id, execution_id, intent, intent_embedding, "
            "tools_ok, tools_failed) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (execution_id) DO NOTHING",
            [
                (tenant, execution_id, intent, np.asarray(vector, np.float32), list(ok), list(bad))
                for tenant, execution_id, intent, vector, ok, bad in rows
            ],
        )
