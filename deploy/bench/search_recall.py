"""`bench search` recall: on every set, the shipped ranking beside exact dense retrieval,
before any learning and as the tenant learns.

Zero-shot: each query is searched as the gateway searches (``gather_evidence``, then the
shipped fusion weights) over the tools indexed as the toolhost indexes them
(``indexed_texts``); the dense baseline is MiniLM cosine over "name: description", exact. Learned: a set's requests are split by gold tool into a learning half and a test
half (seeded); learning requests are stored as finished executions (intent = request, a
trace calling the gold tools), ingested by ``ingest_executions`` as the learning worker
does and consolidated as the beat task does; the test half is searched after 0, 10, 25 and
50 % of all requests, the tenant's query adapter applied when one shipped.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import Query, SearchSet, Tool
from shared.db import connect
from shared.embeddings import Embedder
from shared.learning.consolidate import Consolidation, consolidate_tenant
from shared.learning.ingest import ingest_executions
from shared.search.fusion import WEIGHTS, fuse
from shared.search.hybrid import Evidence, embed_texts_for_query, gather_evidence

TENANT = "bench"
FRACTIONS = (0.0, 0.10, 0.25, 0.50)
SEED = 13
KS = (1, 5, 10)


@dataclass(frozen=True)
class Judged:
    """One query's evidence as searched, its gold, its dense-baseline ranking (tool keys)
    and its embedding."""

    evidence: Evidence
    gold: frozenset[str]
    dense: list[str]
    vector: np.ndarray | None = None


def indexed_texts(tools: Sequence[Tool]) -> list[str]:
    """What the product embeds for each tool, as the toolhost's sync does
    (``shared.tools.store.search_text``; a checkout from before it embedded
    "name: description", and ``bench search --gate`` measures such checkouts too)."""
    try:
        from shared.tools.store import search_text
    except ImportError:
        return [f"{t.name}: {t.description}" for t in tools]
    return [search_text(server=t.server, name=t.name, description=t.description) for t in tools]


def metrics(ranked: Sequence[str], gold: frozenset[str], *, scoring: str) -> dict[str, float]:
    """top-1 (the first hit is gold) and @5/@10 (``recall``: share of gold found;
    ``any``: 1 if any gold is found)."""
    out = {"top1": 1.0 if ranked[:1] and ranked[0] in gold else 0.0}
    for k in KS[1:]:
        found = gold & set(ranked[:k])
        out[f"@{k}"] = len(found) / len(gold) if scoring == "recall" else float(bool(found))
    return out


def average(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = ("top1", *(f"@{k}" for k in KS[1:]))
    n = max(1, len(rows))
    return {k: round(sum(r[k] for r in rows) / n, 3) for k in keys}


def hybrid_ranking(
    evidence: Evidence, *, weights: Mapping[str, float], key: Mapping[str, str]
) -> list[str]:
    """The fused ranking as gold keys (tool id or name), best first."""
    fused = fuse(dense=evidence.dense, features=evidence.features, weights=weights)
    order = sorted(fused, key=lambda t: (-fused[t], t))[: max(KS)]
    return [key.get(t, t) for t in order]


def evaluate(
    judged: Sequence[Judged], *, weights: Mapping[str, float], key: Mapping[str, str], scoring: str
) -> dict[str, float]:
    return average(
        [
            metrics(hybrid_ranking(j.evidence, weights=weights, key=key), j.gold, scoring=scoring)
            for j in judged
        ]
    )


def dense_metrics(judged: Sequence[Judged], *, scoring: str) -> dict[str, float]:
    return average([metrics(j.dense, j.gold, scoring=scoring) for j in judged])


def judge(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    dataset: SearchSet,
    queries: Sequence[Query],
    reference: np.ndarray,
    tenant: str = TENANT,
    adapted: bool = False,
) -> list[Judged]:
    """Evidence, gold and the exact dense ranking of each query (``adapted``: the dense list
    through the tenant's shipped query adapter, as the product searches)."""
    keys = [t.name if dataset.by == "name" else t.id for t in dataset.tools]
    out = []
    for query in queries:
        plain = np.asarray(embedder.encode_reference([query.text])[0], np.float32)
        order = np.argsort(-(reference @ plain), kind="stable")[:10]
        vectors = embedder.embed_query(embed_texts_for_query(query.text))
        evidence = gather_evidence(
            conn,
            query=query.text,
            query_embedding=vectors[0],
            clause_embeddings=vectors[1:],
            tenant_id=tenant,
            adapted=adapted,
        )
        out.append(
            Judged(
                evidence=evidence,
                gold=query.gold,
                dense=[keys[i] for i in order],
                vector=np.asarray(vectors[0], np.float32),
            )
        )
    return out


def learning_split(
    queries: Sequence[Query], *, seed: int = SEED
) -> tuple[list[Query], list[Query]]:
    """(learning half, test half): each gold tool's requests alternate between the halves."""
    rng = random.Random(seed)
    groups: dict[str, list[Query]] = {}
    for q in queries:
        groups.setdefault(sorted(q.gold)[0], []).append(q)
    learn: list[Query] = []
    test: list[Query] = []
    for tool in sorted(groups):
        members = groups[tool][:]
        rng.shuffle(members)
        first = rng.random() < 0.5
        for i, q in enumerate(members):
            (learn if (i % 2 == 0) == first else test).append(q)
    rng.shuffle(learn)
    return learn, test


def tool_ids(dataset: SearchSet) -> dict[str, str]:
    """Gold key → tool id (a name on several servers: its first tool)."""
    ids_of: dict[str, str] = {}
    for t in dataset.tools:
        ids_of.setdefault(t.name if dataset.by == "name" else t.id, t.id)
    return ids_of


def learn_from(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    dataset: SearchSet,
    queries: Sequence[Query],
    tenant: str = TENANT,
) -> None:
    """Store each request as a succeeded execution calling its gold tools; ingest them."""
    executions = store_runs(conn, dataset=dataset, queries=queries, tenant=tenant)
    ingest_executions(conn, execution_ids=executions, embedder=embedder)
    conn.commit()


def store_runs(
    conn: psycopg.Connection[Any],
    *,
    dataset: SearchSet,
    queries: Sequence[Query],
    tenant: str = TENANT,
) -> list[str]:
    """Store each request as a succeeded execution calling its gold tools (not yet
    ingested); their ids, in order."""
    ids_of = tool_ids(dataset)
    executions = []
    for query in queries:
        events: list[dict[str, Any]] = []
        for n, gold in enumerate(sorted(query.gold)):
            base = {"call_id": f"c{n}", "tool": ids_of[gold], "parent": None}
            events.append({"type": "tool_start", **base, "ts": 1.0 + n})
            events.append(
                {"type": "tool_end", **base, "ts": 1.5 + n, "duration_ms": 1.0, "ok": True}
            )
        code = "# " + query.text + "\n" + "\n".join(f"await mcp.{e['tool']}()" for e in events[::2])
        row = conn.execute(
            "INSERT INTO executions (tenant_id, status, code, intent, timeout_s, trace, "
            "duration_ms, finished_at, result) VALUES (%s, 'succeeded', %s, %s, 30, %s, 5, "
            "now(), '{\"ok\": true}') RETURNING id",  # an empty result is no evidence
            (tenant, code, query.text, Jsonb(events)),
        ).fetchone()
        assert row is not None
        executions.append(str(row["id"]))
    return executions


def learning_points(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    dataset: SearchSet,
    learn: Sequence[Query],
) -> Iterator[tuple[float, int, Consolidation | None]]:
    """At each of ``FRACTIONS`` of the set's requests: (fraction, learning requests stored,
    the consolidation), once the learning half's next requests are stored and ingested and
    the tenant consolidated as the beat task does (its adapter ships only if it passes the
    hold-out check). The connection is in autocommit while the caller searches."""
    done = 0
    for fraction in FRACTIONS:
        upto = min(len(learn), round(fraction * len(dataset.queries)))
        learn_from(conn, embedder=embedder, dataset=dataset, queries=learn[done:upto])
        done = upto
        consolidation = consolidate_tenant(conn, tenant_id=TENANT) if upto else None
        conn.commit()
        conn.autocommit = True
        yield fraction, upto, consolidation
        conn.autocommit = False


def run_set(*, embedder: Embedder, dataset: SearchSet) -> dict[str, Any]:
    """Zero-shot per split, then the learning curve on the test half: dense beside the
    product, as searched after each point's consolidation."""
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    docs = [f"{t.name}: {t.description}" for t in dataset.tools]
    reference = np.asarray(embedder.encode_reference(docs), np.float32)
    learn, test_half = learning_split(dataset.queries)
    scoring = dataset.scoring
    out: dict[str, Any] = {"tools": len(dataset.tools), "queries": len(dataset.queries)}
    with bench_database() as (url, _settings), connect(url) as conn:
        vectors = np.asarray(embedder.embed(indexed_texts(dataset.tools)))
        index_tools(conn, tools=dataset.tools, vectors=vectors)
        conn.autocommit = True
        out["zero_shot"] = {}
        for split in ("tune", "holdout"):
            judged = judge(
                conn,
                embedder=embedder,
                dataset=dataset,
                queries=[q for q in dataset.queries if q.split == split],
                reference=reference,
            )
            out["zero_shot"][split] = {
                "queries": len(judged),
                "dense": dense_metrics(judged, scoring=scoring),
                "hybrid": evaluate(judged, weights=WEIGHTS, key=key, scoring=scoring),
            }
        conn.autocommit = False
        curve: list[dict[str, Any]] = []
        for fraction, upto, consolidation in learning_points(
            conn, embedder=embedder, dataset=dataset, learn=learn
        ):
            product = judge(
                conn,
                embedder=embedder,
                dataset=dataset,
                queries=test_half,
                reference=reference,
                adapted=True,
            )
            adapter_fit = consolidation.adapter if consolidation else None
            curve.append(
                {
                    "fraction": fraction,
                    "learned_executions": upto,
                    "dense": dense_metrics(product, scoring=scoring),
                    "product": evaluate(product, weights=WEIGHTS, key=key, scoring=scoring),
                    "adapter_fit": vars(adapter_fit) if adapter_fit else None,
                }
            )
    out["learned"] = {
        "learning_requests_per_tool": learning_per_tool(learn, test_half),
        "test_queries": len(test_half),
        "curve": curve,
    }
    return out


def learning_per_tool(learn: Sequence[Query], test: Sequence[Query]) -> float:
    """Learning requests per tool that has test requests (learning shows from two or more)."""
    tools = {sorted(q.gold)[0] for q in test}
    return round(sum(1 for q in learn if sorted(q.gold)[0] in tools) / max(1, len(tools)), 2)
