"""Rows of the `tool_edges` table: edge upserts, reads, node removal; graph metrics refreshed.

The PageRank and community columns live on `tools` and `capabilities`; their stores
write them (``set_graph_metrics``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg

from shared.capabilities import store as capabilities_store
from shared.graph.edges import CAPABILITY_PREFIX, Edge
from shared.graph.metrics import GraphMetrics, compute_metrics
from shared.graph.weights import KIND_WEIGHTS, EdgeKind
from shared.tools import store as tools_store

Conn = psycopg.Connection[dict[str, Any]]


def upsert_edges(conn: Conn, *, edges: Sequence[Edge]) -> int:
    """Add each edge's count; weight = kind weight * (1 + ln count), as shared.graph.weights says.

    Edges of many traces are summed first (one row per edge), and written in
    (kind, src, dst) order: every writer locks rows in the same order, no deadlocks.
    """
    totals: dict[tuple[EdgeKind, str, str], int] = {}
    for e in edges:
        key = (e.kind, e.src, e.dst)
        totals[key] = totals.get(key, 0) + e.count
    if not totals:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO tool_edges (src, dst, kind, count, weight)
            VALUES (%(src)s, %(dst)s, %(kind)s, %(count)s, %(kw)s * (1 + ln(%(count)s)))
            ON CONFLICT (src, dst, kind) DO UPDATE
               SET count = tool_edges.count + EXCLUDED.count,
                   weight = %(kw)s * (1 + ln(tool_edges.count + EXCLUDED.count)),
                   updated_at = now()
            """,
            [
                {
                    "src": src,
                    "dst": dst,
                    "kind": str(kind),
                    "count": count,
                    "kw": KIND_WEIGHTS[kind],
                }
                for (kind, src, dst), count in sorted(totals.items())
            ],
        )
    return len(totals)


def graph_fingerprint(conn: Conn) -> str:
    """Cheap change detector: edge count, total count and latest update of `tool_edges`."""
    row = conn.execute(
        "SELECT count(*) AS n, coalesce(sum(count), 0) AS c, max(updated_at) AS t FROM tool_edges"
    ).fetchone()
    assert row is not None
    return hashlib.sha256(f"{row['n']}|{row['c']}|{row['t']}".encode()).hexdigest()[:16]


def refresh_metrics(conn: Conn) -> GraphMetrics:
    """Recompute PageRank + Louvain over all edges and store them on tools and capabilities."""
    rows = conn.execute("SELECT src, dst, kind, weight FROM tool_edges").fetchall()
    metrics = compute_metrics(rows=rows)
    tool_rows = [
        (node, metrics.pagerank.get(node, 0.0), metrics.community.get(node))
        for node in metrics.pagerank
        if not node.startswith(CAPABILITY_PREFIX)
    ]
    cap_rows = [
        (
            node.removeprefix(CAPABILITY_PREFIX),
            metrics.pagerank.get(node, 0.0),
            metrics.community.get(node),
        )
        for node in metrics.pagerank
        if node.startswith(CAPABILITY_PREFIX)
    ]
    # Nodes that left the graph (pruned capabilities' edges) fall back to neutral.
    tools_store.set_graph_metrics(conn, rows=tool_rows)
    capabilities_store.set_graph_metrics(conn, rows=cap_rows)
    return metrics


def heaviest_edges(conn: Conn, *, limit: int, tenant_id: str) -> list[dict[str, Any]]:
    """The ``limit`` heaviest edges (src, dst, kind, weight, count) a tenant may see: between
    tools (shared) or touching only its own capabilities."""
    return conn.execute(
        """
        WITH mine AS (SELECT %(prefix)s || id::text AS node FROM capabilities
                       WHERE tenant_id = %(tenant)s)
        SELECT src, dst, kind, weight, count FROM tool_edges
         WHERE (NOT starts_with(src, %(prefix)s) OR src IN (SELECT node FROM mine))
           AND (NOT starts_with(dst, %(prefix)s) OR dst IN (SELECT node FROM mine))
         ORDER BY weight DESC LIMIT %(limit)s
        """,
        {"prefix": CAPABILITY_PREFIX, "tenant": tenant_id, "limit": limit},
    ).fetchall()


def delete_nodes(conn: Conn, *, nodes: Sequence[str]) -> None:
    """Remove every edge into or out of these nodes."""
    conn.execute(
        "DELETE FROM tool_edges WHERE src = ANY(%(n)s) OR dst = ANY(%(n)s)", {"n": list(nodes)}
    )
