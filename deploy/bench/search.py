"""`agentcards bench search`: the shipped tool ranking beside dense retrieval, and its latency.

Recall (``search_recall``), on every set of ``datasets.all_sets``: each catalogue is indexed
the way the toolhost indexes tools (embedding of "name: description") and each request
searched as the gateway searches, before any learning and as the tenant learns; the plain
dense baseline — MiniLM cosine over "name: description", exact — runs in the same process.
On LiveMCPBench each task's ``Question`` is a query and the annotated tools are the gold
set (matched by tool name: a few names exist on several servers and any of them counts, as
in the dataset's own baseline).
Latency: 10k synthetic tools (real descriptions re-used under new ids, embeddings
jittered) and 100k synthetic edges; each query is embedded as the gateway does
(``Embedder.embed_query``, never from a cache: the query list repeats) and searched,
every other one with two context tools. Embedding, search and total are reported apart,
with the machine's load average, since other work on a small machine moves them all;
then the tenant's stored intents are consolidated (timed) and the searches timed again with
its query adapter applied.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from functools import partial
from typing import Any

import numpy as np
import psycopg

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import Tool, all_sets, data_dir, load_catalogue, load_set, load_tasks
from deploy.bench.learning_graph import SERVER_SIZE, synthetic_edges
from deploy.bench.search_recall import run_set
from shared.config import DEFAULT_TENANT, Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.graph.metrics import compute_metrics
from shared.learning.consolidate import consolidate_tenant
from shared.offline import go_offline
from shared.search.adapter_store import matrix_bytes
from shared.search.fusion import WEIGHTS
from shared.search.hybrid import embed_texts_for_query, hybrid_tool_search

KS = (5, 10, 20)
LATENCY_TOOLS = 10_000
LATENCY_EDGES = 100_000
LATENCY_INTENTS = 100_000  # stored past intents (intent_tools rows) the learned vote reads
LATENCY_QUERIES = 200  # enough for a stable p95 (10 samples beyond it)
JITTER = 0.05  # noise added to re-used embeddings so synthetic tools are not exact copies
# Searches timed beside the shipped one: query set → label → hybrid_tool_search options.
Variants = Mapping[str, Mapping[str, Mapping[str, Any]]]


def latency_benchmark(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    tools: Sequence[Tool],
    query_sets: dict[str, Sequence[str]],
    n_tools: int,
    n_edges: int,
    n_queries: int,
    n_intents: int = LATENCY_INTENTS,
    seed: int = 0,
    before: Variants | None = None,
    after: Variants | None = None,
) -> dict[str, Any]:
    """p50/p95 of embed + hybrid search on a synthetic catalogue, graph and store of past
    intents of the given sizes, for each set of queries, before and after the tenant's
    consolidation. ``before`` / ``after``: other searches timed in the same run beside the
    shipped one (set name → label → ``hybrid_tool_search`` options)."""
    rng = np.random.default_rng(seed)
    base = np.asarray(embedder.embed([f"{t.name}: {t.description}" for t in tools]), np.float32)
    picks = rng.integers(0, len(tools), size=n_tools)
    vectors = base[picks] + rng.normal(0.0, JITTER, size=(n_tools, base.shape[1])).astype(
        np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # Ids match synthetic_edges' naming so the graph lands on these tools.
    synthetic = [
        Tool(
            server=f"srv{i // SERVER_SIZE}",
            name=f"tool{i}",
            description=f"{tools[p].name.replace('_', ' ')}: {tools[p].description}",
            input_schema=tools[p].input_schema,
        )
        for i, p in enumerate(picks.tolist())
    ]
    index_tools(conn, tools=synthetic, vectors=vectors)
    edges = synthetic_edges(n_tools=n_tools, n_edges=n_edges, seed=seed)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) VALUES (%s, %s, %s, %s, 1) "
            "ON CONFLICT DO NOTHING",
            edges,
        )
        metrics = compute_metrics(rows=edges)
        cur.executemany(
            "UPDATE tools SET pagerank = %s, community = %s WHERE id = %s",
            [(pr, metrics.community.get(t), t) for t, pr in metrics.pagerank.items()],
        )
    conn.commit()
    intent_texts = [q for queries in query_sets.values() for q in queries]
    store_synthetic_intents(
        conn,
        base=np.asarray(embedder.embed(intent_texts), np.float32),
        tool_ids=[t.id for t in synthetic],
        n_intents=n_intents,
        rng=rng,
    )
    # Vacuum as well as analyse: autovacuum would otherwise start on the freshly loaded
    # tables (and their HNSW index) during the timed queries and take one of the cores,
    # and a table in service is vacuumed anyway.
    conn.autocommit = True
    conn.execute("VACUUM (ANALYZE) tools")
    conn.execute("VACUUM (ANALYZE) tool_edges")
    conn.execute("VACUUM (ANALYZE) intent_tools")
    # The timed searches stay in autocommit, as the gateway runs them.
    ids = [t.id for t in synthetic]
    load_before = os.getloadavg()[0]
    timed = {}
    time_them = partial(
        _time_queries, conn, embedder=embedder, ids=ids, n_queries=n_queries, rng=rng
    )
    for name, queries in query_sets.items():
        timed[name] = time_them(queries=queries)
        for label, options in (before or {}).get(name, {}).items():
            timed[f"{name}_{label}"] = time_them(queries=queries, **options)
    # One consolidation pass over the tenant's stored intents, timed (target <= 60 s at 100k
    # on one core), then the same searches reading its query adapter.
    conn.autocommit = False
    started = time.perf_counter()
    done = consolidate_tenant(conn, tenant_id=DEFAULT_TENANT)
    conn.commit()
    consolidation = {
        **asdict(done),
        "wall_seconds": round(time.perf_counter() - started, 3),
        "target_seconds": 60.0,
    }
    if done.adapter is None or not done.adapter.shipped:
        # The synthetic runs' tools are random, so the hold-out check rightly keeps the
        # identity; time the search with an adapter applied all the same.
        _ship_for_timing(conn, dim=base.shape[1], rng=rng)
    conn.autocommit = True
    conn.execute("VACUUM (ANALYZE) tool_vectors")
    for name, queries in query_sets.items():
        timed[f"{name}_after_consolidation"] = time_them(queries=queries)
        for label, options in (after or {}).get(name, {}).items():
            timed[f"{name}_{label}"] = time_them(queries=queries, **options)
    return {
        "tools": n_tools,
        "edges": n_edges,
        "stored_intents": n_intents,
        "consolidation": consolidation,
        "query_sets": timed,
        "target_p95_ms": 15.0,
        # Other work on the machine stretches every percentile: the 1-minute load
        # average (runnable processes) before and after the timed queries, and the cores.
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }


def _ship_for_timing(conn: psycopg.Connection[Any], *, dim: int, rng: np.random.Generator) -> None:
    """A shipped query adapter for the searching tenant (near the identity), for timing."""
    matrix = np.eye(dim, dtype=np.float32) + rng.normal(0.0, 0.01, (dim, dim)).astype(np.float32)
    conn.execute(
        "INSERT INTO query_adapters (tenant_id, version, trained_on, held_back, shipped, "
        "matrix, dim, seconds) SELECT %s, coalesce(max(version), 0) + 1, 0, 0, true, %s, %s, 0 "
        "FROM query_adapters WHERE tenant_id = %s",
        (DEFAULT_TENANT, matrix_bytes(matrix), dim, DEFAULT_TENANT),
    )
    conn.commit()


def store_synthetic_intents(
    conn: psycopg.Connection[Any],
    *,
    base: np.ndarray,
    tool_ids: Sequence[str],
    n_intents: int,
    rng: np.random.Generator,
) -> None:
    """``n_intents`` past runs of the searching tenant: the timed queries' embeddings jittered
    (so the nearest intents are close, as for a busy tenant, and every search gets votes),
    each with one to three tools, one run in ten with a failed call."""
    picks = rng.integers(0, len(base), size=n_intents)
    vectors = base[picks] + rng.normal(0.0, JITTER, size=(n_intents, base.shape[1])).astype(
        np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tools = rng.integers(0, len(tool_ids), size=(n_intents, 3))
    sizes = rng.integers(1, 4, size=n_intents)
    failed = rng.random(n_intents) < 0.1
    # Loading 100k rows into a live HNSW index inserts one by one; building it after is
    # several times faster (as a restore does).
    conn.execute("DROP INDEX intent_tools_embedding_hnsw")
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY intent_tools (tenant_id, intent, intent_embedding, tools_ok, tools_failed) "
            "FROM STDIN"
        ) as copy,
    ):
        for i in range(n_intents):
            used = [tool_ids[int(j)] for j in tools[i, : int(sizes[i])]]
            copy.write_row(
                (
                    DEFAULT_TENANT,
                    f"past request {i}",
                    vectors[i],
                    used[1:] if failed[i] else used,
                    used[:1] if failed[i] else [],
                )
            )
    conn.execute(
        "CREATE INDEX intent_tools_embedding_hnsw ON intent_tools "
        "USING hnsw (intent_embedding vector_cosine_ops)"
    )
    conn.commit()


def _time_queries(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    queries: Sequence[str],
    ids: Sequence[str],
    n_queries: int,
    rng: np.random.Generator,
    **options: Any,
) -> dict[str, Any]:
    """Embed and search ``n_queries`` of ``queries`` (every other with two context tools),
    on an autocommit connection as the gateway does (``services/gateway/search.py``);
    ``options`` go to ``hybrid_tool_search``."""
    totals: list[float] = []
    searches: list[float] = []
    embeddings: list[float] = []
    tokens: list[int] = []
    for i in range(n_queries + 5):  # 5 warm-up queries (model and caches) are not counted
        query = queries[i % len(queries)]
        context = [ids[int(j)] for j in rng.integers(0, len(ids), size=2)] if i % 2 else []
        texts = embed_texts_for_query(query)
        started = time.perf_counter()
        query_vectors = embedder.embed_query(texts)
        embedded = time.perf_counter()
        hybrid_tool_search(
            conn,
            query=query,
            query_embedding=query_vectors[0],
            clause_embeddings=query_vectors[1:],
            limit=10,
            context_tools=context,
            **options,
        )
        done = time.perf_counter()
        if i >= 5:
            totals.append((done - started) * 1000)
            searches.append((done - embedded) * 1000)
            embeddings.append((embedded - started) * 1000)
            tokens.append(sum(len(t) for t in embedder.token_ids(texts)))
    return {
        "queries": n_queries,
        # What the model reads per request: the query and its clauses, in tokens.
        "tokens_embedded": {
            "p50": float(np.percentile(tokens, 50)) if tokens else 0.0,
            "p95": float(np.percentile(tokens, 95)) if tokens else 0.0,
        },
        "total_ms": _percentiles(totals),
        "search_only_ms": _percentiles(searches),
        "embedding_ms": _percentiles(embeddings),
    }


def short_requests() -> list[str]:
    """The paraphrases of ``bench match``'s set: short, one-step requests."""
    return [p for c in load_set()["capabilities"] for p in c["paraphrases"]]


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"p50": 0.0, "p95": 0.0}
    return {
        "p50": round(float(np.percentile(samples, 50)), 2),
        "p95": round(float(np.percentile(samples, 95)), 2),
    }


def run(
    *,
    max_tasks: int | None = None,
    latency_tools: int = LATENCY_TOOLS,
    latency_edges: int = LATENCY_EDGES,
    latency_intents: int = LATENCY_INTENTS,
    latency_queries: int = LATENCY_QUERIES,
    sets: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The whole benchmark as a JSON-ready dict (smaller sizes and fewer ``sets`` for smoke
    tests)."""
    embedder = get_embedder(Settings())
    out: dict[str, Any] = {
        "benchmark": "search",
        "model": embedder.model_name,
        "weights_in_use": dict(WEIGHTS),
        "sets": {},
    }
    for dataset in all_sets():
        if sets is not None and dataset.name not in sets:
            continue
        if max_tasks is not None:
            dataset = replace(dataset, queries=dataset.queries[:max_tasks])
        out["sets"][dataset.name] = run_set(embedder=embedder, dataset=dataset)
    if latency_tools > 0:
        out["latency"] = latency(
            embedder=embedder,
            max_tasks=max_tasks,
            n_tools=latency_tools,
            n_edges=latency_edges,
            n_intents=latency_intents,
            n_queries=latency_queries,
        )
    return out


def latency(
    *,
    embedder: Embedder,
    max_tasks: int | None,
    n_tools: int,
    n_edges: int,
    n_intents: int,
    n_queries: int,
    before: Variants | None = None,
    after: Variants | None = None,
) -> dict[str, Any]:
    """``latency_benchmark`` on a fresh database, over LiveMCPBench's questions and short
    requests."""
    directory = data_dir()
    tools = load_catalogue(directory)
    tasks = load_tasks(directory, names={t.name for t in tools})[:max_tasks]
    with bench_database() as (url, _settings), connect(url) as conn:
        return latency_benchmark(
            conn,
            embedder=embedder,
            tools=tools,
            query_sets={
                # Whole user tasks, often several steps: the recall queries.
                "livemcpbench_questions": [t.question for t in tasks] or ["search the web"],
                # One-step requests as an agent words a tool search (the match set's
                # paraphrases, ~10 tokens).
                "short_requests": short_requests(),
            },
            n_tools=n_tools,
            n_edges=n_edges,
            n_intents=n_intents,
            n_queries=n_queries,
            before=before,
            after=after,
        )


if __name__ == "__main__":
    go_offline()
    print(json.dumps(run(), indent=2))
