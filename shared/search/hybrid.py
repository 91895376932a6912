"""Hybrid tool search: dense (pgvector HNSW) plus fields' words, graph and learned votes, fused."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from shared.config import DEFAULT_TENANT
from shared.search.adapter import adapt
from shared.search.adapter_store import ADAPTER_VERSION_SQL, ADAPTERS, Held
from shared.search.fusion import WEIGHTS, contributions, explain, fuse, support
from shared.search.graph_signals import GraphScores, distinct_context, snapshot_graph_scores
from shared.search.graph_snapshot import GRAPH_SNAPSHOTS, GRAPH_VERSION_SQL, graph_version
from shared.search.learned import FITTED, Vote, nearest_intents_query, tool_votes, voted_tools
from shared.search.lexical import (
    QUERY_LEXEMES_SQL,
    WORD_INDEXES,
    LexicalHit,
    version_of_row,
    words_of_row,
)
from shared.search.pageranks import PAGERANK_VERSION_SQL, PAGERANKS, pagerank_version
from shared.search.query import asks_removal, query_clauses, query_frame
from shared.search.tool_vectors import nearest_tool_vectors_query
from shared.tools.store import get_tools

# Each text signal contributes its top candidates; 50 bounds the HNSW search (ef_search
# is raised to it) and is well past where a tool can still reach the top 10.
MIN_CANDIDATES = 50
# Details are read for this many tools past ``limit``, in case some were just deleted.
DETAIL_SPARES = 5
# Tools whose server is down or left the configuration: never recommended (partial
# index of migration 0008; normally no rows).
UNAVAILABLE_SQL = "SELECT coalesce(array_agg(id), '{}') AS ids FROM tools WHERE NOT available"

Row = dict[str, Any]


@dataclass(frozen=True)
class Evidence:
    """Everything a search knows about its candidates before fusing: one number per feature."""

    dense: dict[str, float]  # the query's cosine, dense top list only
    features: dict[str, dict[str, float]]  # tool → fusion.FEATURES → value (0s left out)
    lexical: dict[str, LexicalHit]
    graph: GraphScores
    pageranks: dict[str, float]
    clause_best: dict[str, float]
    # tool → field → the query words that field holds (what ``why`` names)
    matched: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # the tenant's nearest past intents as read (sim, tools_ok, tools_failed, age_days)
    intents: tuple[Row, ...] = ()


def embed_texts_for_query(query: str) -> list[str]:
    """What to embed for a search (``Embedder.embed_query``): the query itself, then its
    clauses, then its frame (``query_frame``) when it has a payload. The vectors after the
    first are passed on as ``clause_embeddings``; ``split_clauses`` tells the frame apart."""
    frame = query_frame(query)
    return [query, *query_clauses(query), *([frame] if frame else [])]


def split_clauses(
    query: str, clause_embeddings: Sequence[list[float]]
) -> tuple[list[list[float]], list[float] | None]:
    """(the clauses' vectors, the frame's vector or None) of ``embed_texts_for_query``'s
    vectors after the query's: the frame is the last one when the query has one and one
    more vector than clauses was given."""
    vectors = list(clause_embeddings)
    if query_frame(query) is not None and len(vectors) == len(query_clauses(query)) + 1:
        return vectors[:-1], vectors[-1]
    return vectors, None


def gather_evidence(
    conn: psycopg.Connection[Any],
    *,
    query: str,
    query_embedding: list[float],
    tenant_id: str = DEFAULT_TENANT,
    context_tools: Sequence[str] = (),
    clause_embeddings: Sequence[list[float]] = (),
    candidates: int = MIN_CANDIDATES,
    vote: Vote = FITTED,
    adapted: bool = True,
    tool_vectors: bool = False,
) -> Evidence:
    """One round trip plus in-memory work: candidates and every feature the fusion weighs.

    Every tool a near past intent names is a candidate (so a vote can always reach it,
    with all its features); ``vote`` says how the intents vote (the bench's ablation).
    The dense list is the query mapped by the tenant's query adapter (``adapted``; the
    bench's zero-shot arms turn it off); the past intents are read with the query as
    embedded, as they were stored, and only those newer than the shipped adapter's fit:
    the vote is immediate learning, for the runs the adapter has not consolidated yet
    (beside it, the vote double-counted the consolidated runs: docs/search.md).
    ``tool_vectors`` also reads the tenant's consolidated tool vectors (feature
    ``toolvec``), as searches did before the adapter: off, since they added nothing beside
    it and cost ~4-6 ms of p95 at 10k vectors; kept for the bench's before/after timing."""
    vector = np.asarray(query_embedding, dtype=np.float32)
    clause_vectors, frame_vector = split_clauses(query, clause_embeddings)
    clauses = [np.asarray(c, dtype=np.float32) for c in clause_vectors]
    frame = np.asarray(frame_vector, dtype=np.float32) if frame_vector is not None else None
    # The frame is searched after the clauses (the last vector), and weighed apart.
    frame_index = len(clauses) + 1 if frame is not None else None
    held = ADAPTERS.held(conn, tenant_id=tenant_id) if adapted else None
    neighbours = functools.partial(
        _read_neighbours,
        conn,
        vector=vector,
        clauses=clauses,
        frame=frame,
        tenant_id=tenant_id,
        candidates=candidates,
    )
    # A round trip costs far more than its statements here (the server's core has gone
    # idle), so on an autocommit connection there is no BEGIN/COMMIT either: a pipeline's
    # statements share one implicit transaction up to its Sync, which is what keeps
    # the local ef_search to them. In the caller's transaction, the setting ends with it.
    with conn.pipeline():
        words_cur = conn.execute(QUERY_LEXEMES_SQL, (query,))
        ranks_cur = conn.execute(PAGERANK_VERSION_SQL)
        nearest_cur, intents_cur = neighbours(held)
        adapter_cur = conn.execute(ADAPTER_VERSION_SQL, (tenant_id,)) if adapted else None
        vectors_cur = (
            conn.execute(
                *nearest_tool_vectors_query(vector=vector, tenant_id=tenant_id, limit=candidates)
            )
            if tool_vectors
            else None
        )
        unavailable_cur = conn.execute(UNAVAILABLE_SQL)
        graph_cur = conn.execute(GRAPH_VERSION_SQL) if distinct_context(context_tools) else None
    words_row = words_cur.fetchone()
    nearest = nearest_cur.fetchall()
    version_row = adapter_cur.fetchone() if adapter_cur is not None else None
    if held is not None and version_row is not None and version_row["version"] != held.version:
        # A consolidation shipped since this process last looked: load it, map again.
        held = ADAPTERS.refresh(conn, tenant_id=tenant_id, version=int(version_row["version"]))
        with conn.pipeline():
            redo, intents_cur = neighbours(held)
        nearest = redo.fetchall()
    found = _nearest_results(nearest, frame_index=frame_index)
    semantic, clause_best, frame_best = found.semantic, found.clause_best, found.frame_best
    lifted = frame_lifts(frame_best, direction=found.direction, removal=asks_removal(query))
    unavailable = _unavailable(unavailable_cur.fetchone())
    index = WORD_INDEXES.get(conn, version=version_of_row(words_row))
    pageranks = PAGERANKS.get(conn, version=pagerank_version(ranks_cur))
    words = words_of_row(words_row)
    lexical = {
        hit.id: hit
        for hit in index.search(words=words, limit=candidates)
        if hit.id not in unavailable
    }
    intents = tuple(intents_cur.fetchall())
    best_dense = max(semantic.values(), default=None)
    learned = {
        t: v
        for t, v in tool_votes(intents, vote=vote, best_dense=best_dense).items()
        if t in index.known and t not in unavailable
    }
    named = sorted(t for t in voted_tools(intents) if t in index.known and t not in unavailable)
    lowest = min(semantic.values(), default=0.0)
    toolvec = {
        r["tool_id"]: float(r["sim"]) - semantic.get(r["tool_id"], lowest)
        for r in (vectors_cur.fetchall() if vectors_cur is not None else ())
        if r["tool_id"] in index.known and r["tool_id"] not in unavailable
    }
    pool = list(
        dict.fromkeys([*semantic, *clause_best, *frame_best, *lexical, *learned, *named, *toolvec])
    )
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
    coverage = index.coverage(words=words, ids=pool)
    matched = index.matched(words=words, ids=pool)
    top_graph = max(graph.score.values(), default=0.0) or 1.0
    top_rank = max(ranks.values(), default=0.0) or 1.0
    features: dict[str, dict[str, float]] = {}
    for tool in pool:
        values = {
            **coverage.get(tool, {}),
            "clause": max(0.0, clause_best.get(tool, 0.0) - semantic.get(tool, 0.0))
            if tool in clause_best
            else 0.0,
            "frame": max(0.0, frame_best[tool] - semantic.get(tool, lowest))
            if tool in lifted
            else 0.0,
            "graph": graph.score.get(tool, 0.0) / top_graph,
            "pagerank": ranks[tool] / top_rank,
            "learned": learned.get(tool, 0.0),
            "toolvec": toolvec.get(tool, 0.0),
        }
        features[tool] = {name: v for name, v in values.items() if v}
    return Evidence(
        dense=semantic,
        features=features,
        lexical=lexical,
        graph=graph,
        pageranks=ranks,
        clause_best=clause_best,
        matched=matched,
        intents=intents,
    )


def _read_neighbours(
    conn: psycopg.Connection[Any],
    held: Held | None,
    *,
    vector: np.ndarray,
    clauses: Sequence[np.ndarray],
    frame: np.ndarray | None,
    tenant_id: str,
    candidates: int,
) -> tuple[psycopg.Cursor[Row], psycopg.Cursor[Row]]:
    """Queue, in the caller's pipeline, the nearest tools of the query and of its frame
    (both mapped by the ``held`` adapter: the frame's lift is its cosine minus the query's,
    and the two must be read in one space, or the lift gives back what the adapter learned
    to take away) and of its clauses, and the tenant's nearest past intents newer than that
    adapter's fit: (tools cursor, intents cursor)."""
    matrix = held.matrix if held else None
    vectors = [
        adapt(matrix, vector),
        *clauses,
        *([adapt(matrix, frame)] if frame is not None else []),
    ]
    # HNSW returns at most ef_search rows (pgvector default 40).
    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(candidates),))
    nearest = conn.execute(*_nearest_query(vectors, limit=candidates))
    after = held.last_intent_id if held else 0
    intents = conn.execute(*nearest_intents_query(vector=vector, tenant_id=tenant_id, after=after))
    return nearest, intents


def rank(evidence: Evidence, *, weights: Mapping[str, float] = WEIGHTS) -> list[tuple[str, float]]:
    """(tool, fused score), best first, ties by id."""
    fused = fuse(dense=evidence.dense, features=evidence.features, weights=weights)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def hybrid_tool_search(
    conn: psycopg.Connection[Any],
    *,
    query: str,
    query_embedding: list[float],
    limit: int,
    tenant_id: str = DEFAULT_TENANT,
    context_tools: Sequence[str] = (),
    clause_embeddings: Sequence[list[float]] = (),
    weights: Mapping[str, float] = WEIGHTS,
    vote: Vote = FITTED,
    tool_vectors: bool = False,
) -> list[Row]:
    """Best ``limit`` tools for ``query``, each with its fused score, per-signal scores and why.

    ``clause_embeddings`` are optional embeddings of ``query_clauses(query)`` and of
    ``query_frame(query)`` (see ``embed_texts_for_query``): multi-step requests find one tool per step
    much better with them. Empty graph, no word match, no past intents or no
    embeddings: the other evidence still ranks. Two round trips: the evidence, then
    the winners' details.
    """
    evidence = gather_evidence(
        conn,
        query=query,
        query_embedding=query_embedding,
        tenant_id=tenant_id,
        context_tools=context_tools,
        clause_embeddings=clause_embeddings,
        candidates=max(MIN_CANDIDATES, 3 * limit),
        vote=vote,
        tool_vectors=tool_vectors,
    )
    ranked = rank(evidence, weights=weights)[: limit + DETAIL_SPARES]
    parts = contributions(dense=evidence.dense, features=evidence.features, weights=weights)
    backing = support(dense=evidence.dense, features=evidence.features)
    vector = np.asarray(query_embedding, dtype=np.float32)
    # A few spares: a tool deleted (or gone unavailable) since the words were loaded.
    found = get_tools(conn, ids=[t for t, _ in ranked], similar_to=vector)
    details = {tool_id: row for tool_id, row in found.items() if row["available"]}
    return [
        _hit(
            details[t],
            fused=f,
            evidence=evidence,
            parts=parts.get(t, {}),
            support=backing.get(t, 0.0),
        )
        for t, f in ranked
        if t in details
    ][:limit]


def _hit(
    row: Row, *, fused: float, evidence: Evidence, parts: Mapping[str, float], support: float
) -> Row:
    tool_id = row["id"]
    semantic = row["semantic"]
    clause_sim = evidence.clause_best.get(tool_id)
    if semantic is not None and clause_sim is not None:
        semantic = max(float(semantic), clause_sim)
    lexical = evidence.lexical.get(tool_id)
    features = evidence.features.get(tool_id, {})
    pagerank = evidence.pageranks.get(tool_id, 0.0)
    return {
        "id": tool_id,
        "server": row["server"],
        "name": row["name"],
        "description": row["description"],
        "input_schema": row["input_schema"],
        "output_schema": row["output_schema"],
        "available": row["available"],
        "score": round(fused, 6),
        "scores": {
            "semantic": round(float(semantic), 4) if semantic is not None else None,
            "lexical": round(lexical.score, 4) if lexical else 0.0,
            "pagerank": round(pagerank, 6),
            "graph": round(evidence.graph.score.get(tool_id, 0.0), 4),
            "learned": round(features.get("learned", 0.0), 4),
            "support": round(support, 4),
        },
        "why": explain(
            parts=parts,
            matched_words=evidence.matched.get(tool_id, {}),
            graph_reasons=evidence.graph.reasons.get(tool_id, []),
            semantic=None if tool_id in evidence.dense else row["semantic"],
            learned=features.get("learned", 0.0),
            support=support,
        ),
    }


def frame_lifts(
    frame_best: Mapping[str, float], *, direction: Mapping[str, str], removal: bool
) -> frozenset[str]:
    """The tools the frame may lift: what the frame matches is the request's action, and a
    tool that declares the opposite direction cannot do it. A request that asks to remove
    nothing (``asks_removal``) does not lift a destructive tool, and one that asks to remove
    does not lift a tool that declares itself read-only. Tools that declare nothing keep
    the frame's lift (MiniLM puts "remember" as near ``delete_observations`` as
    ``add_observations``: research/notes/search-history.md, issue 49 §4)."""
    barred = "read_only" if removal else "destructive"
    return frozenset(t for t in frame_best if direction.get(t) != barred)


def _nearest_query(vectors: Sequence[np.ndarray], *, limit: int) -> tuple[str, dict[str, Any]]:
    """One statement: the ``limit`` nearest tools of each vector (0 = query, 1.. = clauses).

    A UNION ALL of one HNSW-ordered subquery per vector, so each uses the index.
    """
    parts = [
        f"""(SELECT {i} AS v, id, 1 - (embedding <=> %(q{i})s) AS sim,
                   annotations ->> 'destructiveHint' = 'true' AS destructive,
                   annotations ->> 'readOnlyHint' = 'true' AS read_only FROM tools
              WHERE embedding IS NOT NULL AND available
              ORDER BY embedding <=> %(q{i})s
              LIMIT %(limit)s)"""
        for i in range(len(vectors))
    ]
    params: dict[str, Any] = {f"q{i}": v for i, v in enumerate(vectors)}
    params["limit"] = limit
    return "\nUNION ALL\n".join(parts), params


@dataclass(frozen=True)
class Nearest:
    """The dense reads of one search: each vector's nearest tools and what they declare."""

    semantic: dict[str, float]  # the query's cosine
    clause_best: dict[str, float]  # the best clause's cosine
    frame_best: dict[str, float]  # the frame's cosine
    # tool → its declared direction: "destructive" (``destructiveHint: true``) or
    # "read_only" (``readOnlyHint: true``); tools that declare neither are left out
    direction: dict[str, str]


def _nearest_results(rows: Sequence[Row], *, frame_index: int | None = None) -> Nearest:
    """The query's, clauses' and frame's (the vector at ``frame_index``) nearest tools."""
    semantic: dict[str, float] = {}
    clause_best: dict[str, float] = {}
    frame_best: dict[str, float] = {}
    direction: dict[str, str] = {}
    # Rows of each subquery arrive in distance order, query's first.
    for r in sorted(rows, key=lambda r: (r["v"], -float(r["sim"]), r["id"])):
        sim = float(r["sim"])
        # destructiveHint means something only when readOnlyHint is false (the MCP spec).
        if r.get("read_only"):
            direction[r["id"]] = "read_only"
        elif r.get("destructive"):
            direction[r["id"]] = "destructive"
        if r["v"] == 0:
            semantic[r["id"]] = sim
        elif r["v"] == frame_index:
            frame_best[r["id"]] = sim
        else:
            clause_best[r["id"]] = max(sim, clause_best.get(r["id"], -1.0))
    return Nearest(semantic, clause_best, frame_best, direction)


def _unavailable(row: Row | None) -> frozenset[str]:
    return frozenset(row["ids"]) if row else frozenset()
