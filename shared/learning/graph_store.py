"""`tool_edges` upserts and graph-metric storage: the SQL side of shared.graph."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg

from shared.graph.edges import CAPABILITY_PREFIX, Edge
from shared.graph.metrics import GraphMetrics, compute_metrics
from shared.graph.weights import KIND_WEIGHTS, EdgeKind

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
    with conn.cursor() as cur:
        # Nodes that left the graph (pruned capabilities' edges) fall back to neutral.
        cur.execute("UPDATE tools SET pagerank = 0, community = NULL WHERE community IS NOT NULL")
        cur.execute(
            "UPDATE capabilities SET pagerank = 0, community = NULL WHERE community IS NOT NULL"
        )
        if tool_rows:
            cur.execute("CREATE TEMP TABLE _m (id text, pr float8, comm int) ON COMMIT DROP")
            with cur.copy("COPY _m (id, pr, comm) FROM STDIN") as copy:
                for row in tool_rows:
                    copy.write_row(row)
            cur.execute(
                "UPDATE tools t SET pagerank = m.pr, community = m.comm FROM _m m WHERE t.id = m.id"
            )
        if cap_rows:
            cur.executemany(
                "UPDATE capabilities SET pagerank = %s, community = %s WHERE id::text = %s",
                [(pr, comm, cap_id) for cap_id, pr, comm in cap_rows],
            )
    return metrics
