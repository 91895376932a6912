"""Error analysis of one learned set (issue 31, round six; bench only).

``bench search`` reports how many test requests the product misses; this prints which, and
what a ceiling on the set looks like:

- **errors**: the product's ranking of the test half after 50 % learned, reproduced as
  ``bench search`` does it (the same split, the learning half stored as succeeded
  executions and consolidated at 10 / 25 / 50 %, the test half searched with the tenant's
  shipped adapter and vote), per request: its text, the expected tools, the product's top 3
  with fused scores, the rank of the first expected tool, and dense's top 1.
- **ceiling**: every request of the set (both halves) dealt into ``k`` folds stratified by
  tool (``cv.cv_folds``); each fold searched against a tenant that learned all the
  other folds, ranked by dense, zero-shot, the shipped adapter in the fusion and the adapter
  beside the gated vote over every run (in memory, no hold-out check). With five requests
  per tool, ``k`` 2 learns about 2.5 per tool (the product's 50 %) and ``k`` 5 learns four
  (leave one request per tool out). ``k`` 1 is resubstitution: the tenant learned every
  request, the searched one included (what the adapter can fit at all, not a forecast).

Run: ``python -m research.search.errors [SET] [--folds K ...]`` (prints JSON; SET
defaults to real_servers_issue31).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import SearchSet
from deploy.bench.search_recall import learning_points, learning_split
from research.search.adapter import Capacity
from research.search.arms import SHIPPED, Ranker, adapter_arm, arms, fused
from research.search.cv import cv_folds
from research.search.datasets import all_sets
from research.search.fit import Judged, average, metrics
from research.search.issue_arms import issue_arms
from research.search.recall import judge, validate_against
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.search.fusion import WEIGHTS, fuse
from shared.search.learned import FITTED

TOP = 3
CEILING_TENANT = "bench-ceiling"  # + k and the fold


def _catalogue(embedder: Embedder, dataset: SearchSet) -> tuple[np.ndarray, np.ndarray]:
    """(reference encodings for the dense baseline, indexed embeddings) of the tools."""
    docs = [f"{t.name}: {t.description}" for t in dataset.tools]
    return (
        np.asarray(embedder.encode_reference(docs), np.float32),
        np.asarray(embedder.embed(docs), np.float32),
    )


def product_at_50(*, embedder: Embedder, dataset: SearchSet) -> list[Judged]:
    """The test half searched as ``bench search``'s product arm after its last point."""
    reference, indexed = _catalogue(embedder, dataset)
    learn, test_half = learning_split(dataset.queries)
    with bench_database() as (url, _settings), connect(url) as conn:
        index_tools(conn, tools=dataset.tools, vectors=indexed)
        for _point in learning_points(conn, embedder=embedder, dataset=dataset, learn=learn):
            pass
        conn.autocommit = True
        return judge(
            conn,
            embedder=embedder,
            dataset=dataset,
            queries=test_half,
            reference=reference,
            adapted=True,
        )


def error_rows(
    judged: Sequence[Judged], texts: Sequence[str], *, key: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Per request: text, expected tools, the product's top 3 with fused scores, the rank
    (1-based) of the first expected tool in the fused list (None: not in it), dense's top 1."""
    rows = []
    for j, text in zip(judged, texts, strict=True):
        scores = fuse(dense=j.evidence.dense, features=j.evidence.features, weights=WEIGHTS)
        order = [key.get(t, t) for t in sorted(scores, key=lambda t: (-scores[t], t))]
        ranks = [i + 1 for i, t in enumerate(order) if t in j.gold]
        by_key = {key.get(t, t): s for t, s in scores.items()}
        rows.append(
            {
                "request": text,
                "expected": sorted(j.gold),
                "top": [[t, round(by_key[t], 4)] for t in order[:TOP]],
                "rank": ranks[0] if ranks else None,
                "dense_top1": j.dense[0] if j.dense else None,
                "hit": bool(order) and order[0] in j.gold,
                "dense_hit": bool(j.dense) and j.dense[0] in j.gold,
            }
        )
    return rows


# The strongest of rounds five and six's other arms by the CV (research/notes/search-history.md), beside the
# shipped one: the best of them is a generous ceiling (chosen after seeing the folds).
OTHER_ARMS = (
    "adapter scaled from the identity x1.5",
    "round four: vote in the adapter's space (gate -0.05, weight 1.5)",
    "fusion: adapter + plain vote 0.3",
    "Tool2Vec, alpha 1.0",
    "plain vote + dense, weight 1.0",
)


def ceiling_arms() -> dict[str, Ranker]:
    others = {**arms(), **issue_arms()}
    return {
        "dense": lambda j, key: list(j.dense),
        "zero-shot": lambda j, key: fused(j.evidence, key),
        SHIPPED: adapter_arm(Capacity()),
        "adapter + gated vote over every run": adapter_arm(Capacity(), vote=FITTED),
        **{name: others[name] for name in OTHER_ARMS},
    }


def ceiling(*, embedder: Embedder, dataset: SearchSet, folds: int, seed: int = 0) -> dict[str, Any]:
    """Every request searched once against a tenant that learned the other ``folds - 1``
    folds; each arm's top-1 / @5 / @10 over all requests."""
    reference, indexed = _catalogue(embedder, dataset)
    descriptions = {t.id: v for t, v in zip(dataset.tools, indexed, strict=True)}
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    dealt = cv_folds(dataset.queries, k=folds, seed=seed)
    queries = list(dataset.queries)
    scores: dict[str, list[dict[str, float]]] = {arm: [] for arm in ceiling_arms()}
    servers: list[str] = []
    with bench_database() as (url, _settings), connect(url) as conn:
        index_tools(conn, tools=dataset.tools, vectors=indexed)
        conn.commit()
        for f, held in enumerate(dealt):
            judged = validate_against(
                conn,
                embedder=embedder,
                dataset=dataset,
                # k 1: resubstitution (every request learned, the searched one included).
                fit_part=queries
                if folds == 1
                else [q for g, d in enumerate(dealt) if g != f for q in d],
                validation=held,
                tenant=f"{CEILING_TENANT}{folds}-{f}",
                reference=reference,
                descriptions=descriptions,
            )
            servers += [_server(j.gold) for j in judged]
            for arm, rank in ceiling_arms().items():
                scores[arm] += [
                    metrics(rank(j, key), j.gold, scoring=dataset.scoring) for j in judged
                ]
    learned = len(queries) * ((folds - 1) / folds if folds > 1 else 1.0)
    return {
        "folds": folds,
        "learned_requests_per_tool": round(learned / len({t.id for t in dataset.tools}), 2),
        "requests": len(queries),
        "arms": {arm: average(rows) for arm, rows in scores.items()},
        "top1_by_server": {
            arm: by_server(servers, [r["top1"] for r in rows]) for arm, rows in scores.items()
        },
    }


def _server(gold: frozenset[str]) -> str:
    return sorted(gold)[0].split(":", 1)[0]


def by_server(servers: Sequence[str], hits: Sequence[float]) -> dict[str, str]:
    """Per server of the expected tool: hits / requests."""
    out: dict[str, list[float]] = {}
    for server, hit in zip(servers, hits, strict=True):
        out.setdefault(server, []).append(hit)
    return {s: f"{int(sum(v))}/{len(v)}" for s, v in sorted(out.items())}


def nearest_request(*, embedder: Embedder, dataset: SearchSet) -> dict[str, float]:
    """How often a request's nearest other request (cosine of the indexed embeddings) is for
    one of its expected tools: what a vote over every other request could be right on, at
    best, as the single nearest neighbour; beside it, how often the nearest description is."""
    queries = list(dataset.queries)
    vectors = np.asarray(embedder.embed([q.text for q in queries]), np.float32)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    nearest = sims.argmax(axis=1)
    same = [bool(q.gold & queries[n].gold) for q, n in zip(queries, nearest, strict=True)]
    _reference, indexed = _catalogue(embedder, dataset)
    ids = [t.id for t in dataset.tools]
    best = (vectors @ indexed.T).argmax(axis=1)
    return {
        "nearest_request_same_tool": round(float(np.mean(same)), 3),
        "nearest_description_right": round(
            float(np.mean([ids[b] in q.gold for q, b in zip(queries, best, strict=True)])), 3
        ),
    }


def error_run(name: str, *, folds: Sequence[int]) -> dict[str, Any]:
    embedder = get_embedder(Settings())
    dataset = next(d for d in all_sets() if d.name == name)
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    _learn, test_half = learning_split(dataset.queries)
    rows = error_rows(
        product_at_50(embedder=embedder, dataset=dataset), [q.text for q in test_half], key=key
    )
    misses = [r for r in rows if not r["hit"]]
    return {
        "benchmark": "search-errors",
        "set": name,
        "test_requests": len(rows),
        "product_top1": round(sum(r["hit"] for r in rows) / max(1, len(rows)), 3),
        "dense_top1": round(sum(r["dense_hit"] for r in rows) / max(1, len(rows)), 3),
        "misses": len(misses),
        "misses_expected_at_rank_2": sum(r["rank"] == 2 for r in misses),
        "misses_dense_right": sum(r["dense_hit"] for r in misses),
        "top1_by_server": {
            arm: by_server(
                [_server(frozenset(r["expected"])) for r in rows], [r[hit] for r in rows]
            )
            for arm, hit in (("product", "hit"), ("dense", "dense_hit"))
        },
        "rows": misses + [r for r in rows if r["hit"]],
        "all_requests": nearest_request(embedder=embedder, dataset=dataset),
        "ceiling": [ceiling(embedder=embedder, dataset=dataset, folds=k) for k in folds],
    }


if __name__ == "__main__":
    import json
    import sys

    from shared.offline import go_offline

    go_offline()
    args = sys.argv[1:]
    ks = [int(args[i + 1]) for i, a in enumerate(args) if a == "--folds"] or [2, 5, 10, 1]
    named = [
        a for i, a in enumerate(args) if not a.startswith("--") and args[i - 1 : i] != ["--folds"]
    ]
    print(json.dumps(error_run(named[0] if named else "real_servers_issue31", folds=ks), indent=2))
