"""Learned tool votes: a query's nearest past intents (per tenant) vote for the tools they used.

Every finished execution with an intent leaves a row in ``intent_tools`` (migration
0011): its intent's embedding, the tools whose calls succeeded in a succeeded run and
the tools whose calls failed. A search reads the nearest rows in its first round trip
(one more HNSW statement in the same pipeline) and each row votes: + for its
succeeded tools, - for its failed ones, weighted by how close the intent is and how
recent the run. No training job: one execution is evidence for the next search.

The vote is a nearest-neighbour classifier, gated by the zero-shot evidence: a past intent
counts only when it is nearly as close to the query as the best tool description (``gate``),
so a repeat or close paraphrase of a past request moves the ranking while a merely related
one, whose tool is often another than the one asked for, says nothing; when nothing close
was run every vote is 0 and the ranking is exactly the zero-shot one. It is the immediate
part of learning: the search reads a run here only until the tenant's query adapter has
consolidated it (``shared.search.adapter``; docs/search.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

NEIGHBOURS = 20  # past intents read per search; more add only far, weak votes
HALF_LIFE_DAYS = 30.0  # a run's vote halves every month: tools and habits change


@dataclass(frozen=True)
class Vote:
    """How the nearest past intents vote, and how much the vote weighs in the fusion.

    One past intent weighs ``closeness ** power`` x recency, closeness = (cosine - floor) /
    (1 - floor) (0 at or below ``floor``). A tool's vote is its share of that evidence,
    + for succeeded calls, - for failed ones, shrunk toward 0 by ``prior``:

        vote(tool) = sum(weight * sign) / (sum(weight) + prior)        (``shrink``)

    so the vote's say grows with how much close evidence the tenant has (none: 0, the
    ranking is exactly the zero-shot one; a lot: the tool's share of it). ``weight`` is the
    fusion weight of the vote (``fusion.WEIGHTS['learned']``).
    ``saturate`` divides by max(1, sum(weight)) instead, with no shrinkage (the hand-set vote
    ``LEGACY``); only the bench's ablation uses it.
    """

    floor: float
    power: float
    prior: float
    weight: float
    saturate: bool = False
    # Relative gate (None: off): a past intent counts only when its cosine is at least
    # the query's best tool-description cosine + ``gate``; closeness is then measured from
    # that higher floor. A past request no closer to the query than the best tool's own
    # description says less about the query than zero-shot already does (docs/search.md).
    gate: float | None = None


# The hand-set vote the bench ablates against: a floor at 0.5, closeness squared, weight 1.0
# (research/notes/search-history.md).
LEGACY = Vote(floor=0.5, power=2.0, prior=0.0, weight=1.0, saturate=True)
# Fitted, not chosen: `python -m research.search.recall --fit` maximises top-1 + @5 +
# @10 on the validation slices of the learning halves (two folds; never the test halves)
# of the fitted sets, in the product's setting: beside the query adapter the
# consolidation trains on the same runs (``shared.search.adapter``), no set below the
# adapter alone (2026-11-27: objective 2.162 against 2.149 for the adapter alone;
# research/notes/search-history.md). A past intent counts only when it is at most 0.1 below the query's best
# description cosine (``gate``), closeness squared from there; a tool's vote is its share
# of that evidence shrunk by one intent's worth (``prior`` 1), so a lone, barely closer
# run moves little. The vote before (floor 0.3, no gate, prior 0.3) let such runs lift
# their tools over never-run ones and regressed a held-out set (research/notes/search-history.md).
FITTED = Vote(floor=0.0, power=2.0, prior=1.0, weight=0.3, gate=-0.1)
# The vote of 2026-11-25 (fitted without the gate or the adapter), kept for the ablation.
UNGATED = Vote(floor=0.3, power=1.0, prior=0.3, weight=0.3)

# The nearest past intents of the tenant. pgvector 0.6's HNSW filters the tenant after
# the scan (up to hnsw.ef_search rows, which the search raises to its candidate count),
# so a tenant holding a small share of a shared table can see fewer than NEIGHBOURS.
NEAREST_INTENTS_SQL = """
SELECT 1 - (intent_embedding <=> %(v)s) AS sim, tools_ok, tools_failed,
       extract(epoch FROM now() - created_at) / 86400.0 AS age_days
  FROM intent_tools
 WHERE tenant_id = %(tenant)s AND id > %(after)s
 ORDER BY intent_embedding <=> %(v)s
 LIMIT %(n)s
"""


def nearest_intents_query(
    *, vector: np.ndarray, tenant_id: str, after: int = 0
) -> tuple[str, dict[str, Any]]:
    """The statement (and its parameters) reading a query's nearest past intents, those
    stored after row ``after`` only (the runs the tenant's query adapter has not learned)."""
    return NEAREST_INTENTS_SQL, {"v": vector, "tenant": tenant_id, "n": NEIGHBOURS, "after": after}


def effective_floor(vote: Vote, *, best_dense: float | None) -> float:
    """The cosine at or below which a past intent says nothing: the vote's floor, raised to
    the best description cosine + ``gate`` when the vote is gated and that is known."""
    if vote.gate is None or best_dense is None:
        return vote.floor
    return min(0.99, max(vote.floor, best_dense + vote.gate))


def intent_weight(
    *, similarity: float, age_days: float, vote: Vote = FITTED, best_dense: float | None = None
) -> float:
    """How much one past intent counts: 0 at or below the (effective) floor, 1 for the same
    intent, ``closeness ** power`` in between, halved per HALF_LIFE_DAYS of age."""
    floor = effective_floor(vote, best_dense=best_dense)
    if similarity <= floor:
        return 0.0
    closeness = min(1.0, (similarity - floor) / (1.0 - floor))
    return closeness**vote.power * 0.5 ** (max(0.0, age_days) / HALF_LIFE_DAYS)


def tool_votes(
    rows: Iterable[Mapping[str, Any]], *, vote: Vote = FITTED, best_dense: float | None = None
) -> dict[str, float]:
    """Per tool, the vote of the past intents ``rows`` in [-1, 1] (``Vote``); ``best_dense``
    is the query's best tool-description cosine (the gate's reference)."""
    votes: dict[str, float] = {}
    total = 0.0
    for row in rows:
        weight = intent_weight(
            similarity=float(row["sim"]),
            age_days=float(row["age_days"]),
            vote=vote,
            best_dense=best_dense,
        )
        if weight <= 0:
            continue
        total += weight
        for tool in row["tools_ok"] or []:
            votes[tool] = votes.get(tool, 0.0) + weight
        for tool in row["tools_failed"] or []:
            votes[tool] = votes.get(tool, 0.0) - weight
    scale = max(1.0, total) if vote.saturate else total + vote.prior
    return {tool: v / scale for tool, v in votes.items() if v}


def voted_tools(rows: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every tool a row names, whatever its weight: the candidates a vote may reach."""
    return {t for row in rows for t in [*(row["tools_ok"] or []), *(row["tools_failed"] or [])]}


def record_intents(
    conn: psycopg.Connection[Any],
    *,
    rows: Sequence[tuple[str, str, str, Sequence[float], Sequence[str], Sequence[str]]],
) -> None:
    """Store (tenant, execution id, intent, embedding, succeeded tools, failed tools) rows;
    an execution already stored is skipped (redelivery). A capability phrasing with the
    same words (migration 0026) gives way: the run now holds that evidence."""
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "DELETE FROM intent_tools WHERE intent = %s AND tenant_id = %s "
            "AND execution_id IS NULL AND capability_id IS NOT NULL",
            [(intent, tenant) for tenant, _, intent, *_ in rows],
        )
        cur.executemany(
            "INSERT INTO intent_tools (tenant_id, execution_id, intent, intent_embedding, "
            "tools_ok, tools_failed) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (execution_id) DO NOTHING",
            [
                (tenant, execution_id, intent, np.asarray(vector, np.float32), list(ok), list(bad))
                for tenant, execution_id, intent, vector, ok, bad in rows
            ],
        )
