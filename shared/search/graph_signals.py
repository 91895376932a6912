"""Graph signals for tool search relative to the tools already in use (Adamic-Adar, next step).

Computed in SQL over ``tool_edges`` around the context: building a networkx graph of
the 2-hop neighbourhood per query cost ~20 ms at 100k edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

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


# Undirected edges as build_graph + undirected_projection see them: either way, with a
# positive weight, never a self loop. Migration 0004's partial indexes hold exactly these
# rows (with dst/src, kind and weight), so every lookup below is an index-only scan.
_EDGE = "tool_edges WHERE weight > 0 AND dst <> src AND"

# Adamic-Adar of the candidates to the context, summed over the context nodes:
# Σ_c Σ_{z ∈ N(c) ∩ N(x)} 1 / ln deg(z). Only candidates are scored (graph_scores reads
# no other tool), so the work is the candidates' and the context's own edges plus the
# degree of their common neighbours, never every edge two hops out (a hub in the
# context made that thousands of rows). A common neighbour has degree ≥ 2, so ln > 0.
GRAPH_RELATED_SQL = f"""
WITH cn AS (
    SELECT src AS c, dst AS z FROM {_EDGE} src = ANY(%(context)s::text[])
    UNION
    SELECT dst, src FROM {_EDGE} dst = ANY(%(context)s::text[])
),
xz AS (
    SELECT src AS x, dst AS z FROM {_EDGE} src = ANY(%(candidates)s::text[])
       AND dst IN (SELECT z FROM cn)
    UNION
    SELECT dst, src FROM {_EDGE} dst = ANY(%(candidates)s::text[])
       AND src IN (SELECT z FROM cn)
),
deg AS (
    SELECT z, count(*) AS d FROM (
        SELECT src AS z, dst AS n FROM {_EDGE} src = ANY(ARRAY(SELECT DISTINCT z FROM xz))
        UNION
        SELECT dst, src FROM {_EDGE} dst = ANY(ARRAY(SELECT DISTINCT z FROM xz))
    ) AS e
    GROUP BY z
)
SELECT xz.x AS id, sum(1.0 / ln(deg.d)) AS score
  FROM cn JOIN xz ON xz.z = cn.z JOIN deg ON deg.z = cn.z
 WHERE xz.x <> cn.c
 GROUP BY xz.x
"""

# Successors of one node by summed weight ("what usually comes next"); co_used rows are
# stored once per pair and count both ways, as in build_graph.
GRAPH_FOLLOWING_SQL = f"""
SELECT e.id, sum(e.weight) AS weight, max(t.pagerank) AS pagerank FROM (
    SELECT dst AS id, weight FROM {_EDGE} src = %(node)s
    UNION ALL
    SELECT src, weight FROM {_EDGE} dst = %(node)s AND kind = 'co_used'
) AS e
LEFT JOIN tools AS t ON t.id = e.id
GROUP BY e.id
ORDER BY weight DESC, e.id
LIMIT %(limit)s
"""

Query = tuple[str, dict[str, Any]]


def following_query(context_tools: Sequence[str]) -> Query | None:
    """What usually follows the last context tool (rows for ``graph_scores``); None without context.

    Independent of the text signals, so a caller can send it in one pipeline with them.
    """
    context = _context(context_tools)
    if not context:
        return None
    return GRAPH_FOLLOWING_SQL, {"node": context[-1], "limit": NEXT_TOOLS}


def related_query(context_tools: Sequence[str], *, candidates: Sequence[str]) -> Query | None:
    """Adamic-Adar of ``candidates`` to the context (rows for ``graph_scores``); None if empty.

    ``candidates`` must hold every tool ``graph_scores`` may score: the text signals'
    candidates and the tools of the following query.
    """
    context = _context(context_tools)
    pool = [c for c in dict.fromkeys(candidates) if c not in context]
    if not context or not pool:
        return None
    return GRAPH_RELATED_SQL, {"context": context, "candidates": pool}


def graph_scores(
    *,
    context_tools: Sequence[str],
    candidates: Sequence[str],
    following_rows: Sequence[Any],
    related_rows: Sequence[Any],
) -> GraphScores:
    """Adamic-Adar of candidates to the context, plus "often follows" for the last context tool.

    Out-neighbours of the last context tool join the candidates, so the graph can
    propose a next step that neither text signal found. Empty on an empty graph.
    """
    context = _context(context_tools)
    if not context:
        return GraphScores()
    last = context[-1]
    following = [(r["id"], float(r["weight"])) for r in following_rows]
    top_weight = max((w for _, w in following), default=0.0)
    related_all = {r["id"]: float(r["score"]) for r in related_rows}
    pool = [c for c in dict.fromkeys([*candidates, *(t for t, _ in following)]) if c not in context]
    pool = [c for c in pool if not c.startswith("cap:")]  # capabilities are not tools
    score: dict[str, float] = {}
    reasons: dict[str, list[str]] = {}
    for tool in pool:
        value = related_all.get(tool, 0.0)
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


def context_graph_scores(
    conn: psycopg.Connection[Any], *, context_tools: Sequence[str], candidates: Sequence[str]
) -> GraphScores:
    """``graph_scores`` with its two queries run on ``conn`` (one round trip each)."""
    following = following_query(context_tools)
    if following is None:
        return GraphScores()
    following_rows = conn.execute(*following).fetchall()
    related = related_query(
        context_tools, candidates=[*candidates, *(r["id"] for r in following_rows)]
    )
    return graph_scores(
        context_tools=context_tools,
        candidates=candidates,
        following_rows=following_rows,
        related_rows=conn.execute(*related).fetchall() if related else [],
    )


def _context(context_tools: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(t for t in context_tools if t))
