"""Hybrid tool search: dense (pgvector HNSW) + IDF-weighted full text + graph, by weighted RRF."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from shared.search.fusion import Signal, explain, fuse
from shared.search.graph_signals import GraphScores, distinct_context, snapshot_graph_scores
from shared.search.graph_snapshot import GRAPH_SNAPSHOTS, GRAPH_VERSION_SQL, graph_version
from shared.search.lexical import (
    QUERY_LEXEMES_SQL,
    WORD_INDEXES,
    LexicalHit,
    version_of_row,
    words_of_row,
)
from shared.search.pageranks import PAGERANK_VERSION_SQL, PAGERANKS, pagerank_version
from shared.search.query import query_clauses
from shared.tools.store import get_tools

# Each signal contributes its top candidates; 50 is well past where RRF (k=10) gives a
# tool a meaningful share, and it bounds the HNSW search (ef_search is raised to it).
MIN_CANDIDATES = 50
# Weights tuned on the LiveMCPBench dev set (see deploy/bench/search.py): the whole
# query's embedding, its clauses' embeddings and the lexical match count alike; the
# graph counts as much when the caller gives context tools; PageRank is a weak prior
# that only reorders near-ties (central tools are a little more likely).
WEIGHTS = {"semantic": 1.0, "clauses": 1.0, "lexical": 1.0, "graph": 1.0, "pagerank": 0.2}
# Details are read for this many tools past ``limit``, in case some were just deleted.
DETAIL_SPARES = 5
# Tools whose server is down or left the configuration: never recommended (partial
# index of migration 0008; normally no rows).
UNAVAILABLE_SQL = "SELECT coalesce(array_agg(id), '{}') AS ids FROM tools WHERE NOT available"

Row = dict[str, Any]


def embed_texts_for_query(query: str) -> list[str]:
    """What to embed for a search (``Embedder.embed_query``): the query itself, then its clauses."""
    return [query, *query_clauses(query)]


def hybrid_tool_search(
    conn: psycopg.Connection[Any],
    *,
    query: str,
    query_embedding: list[float],
    limit: int,
    context_tools: Sequence[str] = (),
    clause_embeddings: Sequence[list[float]] = (),
) -> list[Row]:
    """Best ``limit`` tools for ``query``, each with its fused score, per-signal scores and why.

    ``clause_embeddings`` are optional embeddings of ``query_clauses(query)``
    (see ``embed_texts_for_query``): multi-step requests find one tool per step
    much better with them. Empty graph, no FTS match or no embeddings: the other
    signals still rank.
    """
    candidates = max(MIN_CANDIDATES, 3 * limit)
    vector = np.asarray(query_embedding, dtype=np.float32)
    vectors = [vector, *(np.asarray(c, dtype=np.float32) for c in clause_embeddings)]
    # Two round trips: everything that needs only the request, then the winners'
    # details; words, PageRanks and the graph are in memory between them. A round trip
    # costs far more than its statements here (the server's core has gone idle), so
    # on an autocommit connection there is no BEGIN/COMMIT either: a pipeline's
    # statements share one implicit transaction up to its Sync, which is what keeps
    # the local ef_search to them. In the caller's transaction, the setting ends with it.
    with conn.pipeline():
        # HNSW returns at most ef_search rows (pgvector default 40).
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(candidates),))
        words_cur = conn.execute(QUERY_LEXEMES_SQL, (query,))
        ranks_cur = conn.execute(PAGERANK_VERSION_SQL)
        nearest_cur = conn.execute(*_nearest_query(vectors, limit=candidates))
        unavailable_cur = conn.execute(UNAVAILABLE_SQL)
        graph_cur = conn.execute(GRAPH_VERSION_SQL) if distinct_context(context_tools) else None
    words_row = words_cur.fetchone()
    semantic, clause_best = _nearest_results(nearest_cur.fetchall())
    unavailable = _unavailable(unavailable_cur.fetchone())
    index = WORD_INDEXES.get(conn, version=version_of_row(words_row))
    pageranks = PAGERANKS.get(conn, version=pagerank_version(ranks_cur))
    lexical = {
        hit.id: hit
        for hit in index.search(words=words_of_row(words_row), limit=candidates)
        if hit.id not in unavailable
    }
    pool = list(dict.fromkeys([*semantic, *clause_best, *lexical]))
    graph = GraphScores()
    if graph_cur is not None:
        snapshot = GRAPH_SNAPSHOTS.get(conn, version=graph_version(graph_cur))
        graph = snapshot_graph_scores(snapshot, context_tools=context_tools, candidates=pool)
        # Capability nodes are not tools, an edge may outlive its tool, and an
        # unavailable tool keeps its edges.
        usable = {t for t in graph.score if t in index.known and t not in unavailable}
        graph = GraphScores(
            score={t: v for t, v in graph.score.items() if t in usable},
            reasons={t: r for t, r in graph.reasons.items() if t in usable},
        )
    pool = list(dict.fromkeys([*pool, *graph.score]))
    ranks = {t: pageranks.of(t) for t in pool}
    signals = [
        Signal("semantic", list(semantic), WEIGHTS["semantic"]),
        Signal("clauses", _by_value(clause_best), WEIGHTS["clauses"]),
        Signal("lexical", list(lexical), WEIGHTS["lexical"]),
        Signal("graph", graph.ranked(), WEIGHTS["graph"]),
        Signal("pagerank", [t for t in _by_value(ranks) if ranks[t] > 0], WEIGHTS["pagerank"]),
    ]
    fused = fuse(signals)
    ranked = sorted(fused, key=lambda t: (-fused[t], t))
    # A few spares: a tool deleted (or gone unavailable) since the words were loaded.
    found = get_tools(conn, ids=ranked[: limit + DETAIL_SPARES], similar_to=vector)
    details = {tool_id: row for tool_id, row in found.items() if row["available"]}
    top = [t for t in ranked[: limit + DETAIL_SPARES] if t in details][:limit]
    positions = {s.name: {t: i for i, t in enumerate(s.ranked, start=1)} for s in signals}
    return [
        _hit(
            details[t],
            fused=fused[t],
            pagerank=ranks[t],
            clause_sim=clause_best.get(t),
            lexical=lexical.get(t),
            graph=graph,
            ranks={name: p[t] for name, p in positions.items() if t in p},
        )
        for t in top
    ]


def _hit(
    row: Row,
    *,
    fused: float,
    pagerank: float,
    clause_sim: float | None,
    lexical: LexicalHit | None,
    graph: GraphScores,
    ranks: dict[str, int],
) -> Row:
    tool_id = row["id"]
    semantic = row["semantic"]
    if semantic is not None and clause_sim is not None:
        semantic = max(float(semantic), clause_sim)
    if "clauses" in ranks:
        ranks.setdefault("semantic", ranks["clauses"])
    return {
        "id": tool_id,
        "server": row["server"],
        "name": row["name"],
        "description": row["description"],
        "input_schema": row["input_schema"],
        "available": row["available"],
        "score": round(fused, 6),
        "scores": {
            "semantic": round(float(semantic), 4) if semantic is not None else None,
            "lexical": round(lexical.score, 4) if lexical else 0.0,
            "pagerank": round(pagerank, 6),
            "graph": round(graph.score.get(tool_id, 0.0), 4),
        },
        "why": explain(
            semantic=float(semantic) if semantic is not None else None,
            matched_words=lexical.words if lexical else [],
            graph_reasons=graph.reasons.get(tool_id, []),
            pagerank=pagerank,
            ranks=ranks,
        ),
    }


def _nearest_query(vectors: Sequence[np.ndarray], *, limit: int) -> tuple[str, dict[str, Any]]:
    """One statement: the ``limit`` nearest tools of each vector (0 = query, 1.. = clauses).

    A UNION ALL of one HNSW-ordered subquery per vector, so each uses the index.
    """
    parts = [
        f"""(SELECT {i} AS v, id, 1 - (embedding <=> %(q{i})s) AS sim FROM tools
              WHERE embedding IS NOT NULL AND available
              ORDER BY embedding <=> %(q{i})s
              LIMIT %(limit)s)"""
        for i in range(len(vectors))
    ]
    params: dict[str, Any] = {f"q{i}": v for i, v in enumerate(vectors)}
    params["limit"] = limit
    return "\nUNION ALL\n".join(parts), params


def _nearest_results(rows: Sequence[Row]) -> tuple[dict[str, float], dict[str, float]]:
    """(query's nearest by similarity, best clause similarity per tool)."""
    semantic: dict[str, float] = {}
    clause_best: dict[str, float] = {}
    # Rows of each subquery arrive in distance order, query's first.
    for r in sorted(rows, key=lambda r: (r["v"], -float(r["sim"]), r["id"])):
        sim = float(r["sim"])
        if r["v"] == 0:
            semantic[r["id"]] = sim
        else:
            clause_best[r["id"]] = max(sim, clause_best.get(r["id"], -1.0))
    return semantic, clause_best


def _unavailable(row: Row | None) -> frozenset[str]:
    return frozenset(row["ids"]) if row else frozenset()


def _by_value(scores: dict[str, float]) -> list[str]:
    return [t for t, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
