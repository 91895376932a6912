"""Graph signals for tool search relative to the tools already in use (Adamic-Adar, next step).

Computed from the in-memory graph (``graph_snapshot``); the suggestion engine's
neighbourhood load reads ``tool_edges`` around a few nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from shared.search.graph_snapshot import (
    GRAPH_SNAPSHOTS,
    GRAPH_VERSION_SQL,
    GraphSnapshot,
    graph_version,
)

# Edges loaded around the context: enough for any realistic neighbourhood, a cap so
# a context tool that is a hub of a huge graph cannot make one search slow.
MAX_EDGES = 20_000
NEXT_TOOLS = 10  # out-neighbours of the last context tool offered as "next step"


@dataclass(frozen=True)
class GraphScores:
    """Per-tool graph score (Adamic-Adar + normalised next-step weight) and reasons."""

    score: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, list[str]] = field(default_factory=dict)

    def ranked(self) -> list[str]:
        """Tool ids by descending graph score (ties by id)."""
        return [t for t, s in sorted(self.score.items(), key=lambda kv: (-kv[1], kv[0])) if s > 0]


def load_neighbourhood(conn: psycopg.Connection[Any], *, nodes: Sequence[str]) -> list[Any]:
    """Edge rows within two hops of ``nodes``: every edge of the nodes and of their neighbours.

    That is exactly what Adamic-Adar needs: a common neighbour's full degree, and
    each candidate's edges to the context's neighbours.
    """
    # Two index lookups (src via the primary key, dst via tool_edges_dst_idx) per hop
    # instead of one OR, which the planner would answer with a scan of every edge.
    hop1 = conn.execute(
        """
        SELECT array_agg(DISTINCT node) AS nodes FROM (
            SELECT dst AS node FROM tool_edges WHERE src = ANY(%(nodes)s)
            UNION ALL SELECT src FROM tool_edges WHERE dst = ANY(%(nodes)s)
            UNION ALL SELECT unnest(%(nodes)s::text[])) AS n
        """,
        {"nodes": list(nodes)},
    ).fetchone()
    around = list(hop1["nodes"] or []) if hop1 else []
    # The neighbourhood is joined as a set: around a tool that thousands of capabilities
    # contain, ``NOT src = ANY(array)`` compared every edge with every node (~0.1 s).
    return conn.execute(
        """
        WITH around AS MATERIALIZED (SELECT DISTINCT unnest(%(around)s::text[]) AS id)
        SELECT e.src, e.dst, e.kind, e.weight FROM tool_edges AS e JOIN around ON e.src = around.id
        UNION ALL
        SELECT e.src, e.dst, e.kind, e.weight FROM tool_edges AS e JOIN around ON e.dst = around.id
         WHERE NOT EXISTS (SELECT 1 FROM around AS a WHERE a.id = e.src)
        LIMIT %(cap)s
        """,
        {"around": around, "cap": MAX_EDGES},
    ).fetchall()


def graph_scores(
    *,
    context_tools: Sequence[str],
    candidates: Sequence[str],
    following: Sequence[tuple[str, float]],
    related: dict[str, float],
) -> GraphScores:
    """Adamic-Adar of candidates to the context, plus "often follows" for the last context tool.

    ``following`` is (tool, summed weight) after the last context tool, best first;
    ``related`` the Adamic-Adar of the candidates and those tools. Out-neighbours join
    the candidates, so the graph can propose a next step that neither text signal
    found. Empty on an empty graph.
    """
    context = distinct_context(context_tools)
    if not context:
        return GraphScores()
    last = context[-1]
    top_weight = max((w for _, w in following), default=0.0)
    pool = [c for c in dict.fromkeys([*candidates, *(t for t, _ in following)]) if c not in context]
    pool = [c for c in pool if not c.startswith("cap:")]  # capabilities are not tools
    score: dict[str, float] = {}
    reasons: dict[str, list[str]] = {}
    for tool in pool:
        value = related.get(tool, 0.0)
        if value > 0:
            score[tool] = value
            reasons.setdefault(tool, []).append(
                f"shares neighbours with {', '.join(context[:2])} (Adamic-Adar {value:.2f})"
            )
    for tool, weight in following:
        if tool in context or tool.startswith("cap:"):
            continue
        # Normalised to [0, 1] so it is comparable with typical Adamic-Adar values.
        score[tool] = score.get(tool, 0.0) + weight / top_weight
        reasons.setdefault(tool, []).append(f"often follows {last}")
    return GraphScores(score=score, reasons=reasons)


def snapshot_graph_scores(
    graph: GraphSnapshot, *, context_tools: Sequence[str], candidates: Sequence[str]
) -> GraphScores:
    """``graph_scores`` for ``candidates`` from an in-memory graph."""
    context = distinct_context(context_tools)
    if not context:
        return GraphScores()
    following = graph.following(context[-1], limit=NEXT_TOOLS)
    return graph_scores(
        context_tools=context,
        candidates=candidates,
        following=following,
        related=graph.adamic_adar(context, [*candidates, *(t for t, _ in following)]),
    )


def context_graph_scores(
    conn: psycopg.Connection[Any], *, context_tools: Sequence[str], candidates: Sequence[str]
) -> GraphScores:
    """``graph_scores`` from the graph snapshot of ``conn``'s database (current version)."""
    if not distinct_context(context_tools):
        return GraphScores()
    graph = GRAPH_SNAPSHOTS.get(conn, version=graph_version(conn.execute(GRAPH_VERSION_SQL)))
    return snapshot_graph_scores(graph, context_tools=context_tools, candidates=candidates)


def distinct_context(context_tools: Sequence[str]) -> list[str]:
    """The context tools, each once, in order, without empty ids."""
    return list(dict.fromkeys(t for t in context_tools if t))
