"""The learned vote before a tenant's first query adapter ships (issue 50; bench only).

Right after a tenant's first runs its search has only the vote (``shared.search.learned``);
the adapter arrives with the first consolidation that can hold back 5 runs. Two checks of a
stronger vote for that window, each computed in memory from searches that read the runs'
nearest intents exactly as the product does (``revote`` recomputes the vote from them):

``--cv CACHE``       the vote-alone grid on the CV folds of the tuning sets (``cv.judge_sets``,
                     pickled to CACHE on the first run): per set, top-1 + @5 + @10 of each
                     variant, its share of the in-memory adapter's lift over dense, and its
                     paired difference from the fitted vote with its standard error.
``--test CACHE SETS``the test halves of ``bench search``'s learned protocol on SETS (comma-
                     separated), right after the runs and after one consolidation, at 10, 25
                     and 50 %: the fitted vote beside ``CANDIDATE``, request by request.

Run: ``python -m research.search.vote_alone --cv /tmp/cv.pkl`` (prints a table).
"""

from __future__ import annotations

import itertools
import math
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import all_sets
from deploy.bench.search_gate import _CachedEmbedder
from deploy.bench.search_recall import TENANT, indexed_texts, judge, learn_from, learning_split
from deploy.bench.search_recall import metrics as bench_metrics
from research.search.arms import SHIPPED, fused
from research.search.arms import arms as all_arms
from research.search.cv import judge_sets, per_request
from research.search.learned import revote
from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from shared.learning.consolidate import consolidate_tenant
from shared.search.learned import FITTED, Vote

# The CV's choice (gate -0.3, weight 0.6; research/notes/search-history.md): not shipped,
# the test halves of two sets nobody tuned to went down with it.
CANDIDATE = Vote(floor=0.0, power=2.0, prior=1.0, weight=0.6, gate=-0.3)
FRACTIONS = (0.10, 0.25, 0.50)


def vote_arm(vote: Vote) -> Any:
    return lambda j, key: fused(revote(j.evidence, vote=vote), key, vote_weight=vote.weight)


def grid() -> dict[str, Vote]:
    out = {"fitted": FITTED}
    for gate, weight, prior, power in itertools.product(
        (-0.1, -0.15, -0.2, -0.3, None), (0.3, 0.6, 1.0, 1.5), (1.0, 0.3), (2.0, 1.0)
    ):
        floor = 0.0 if gate is not None else 0.3
        out[f"gate {gate} weight {weight} prior {prior} power {power}"] = Vote(
            floor=floor, power=power, prior=prior, weight=weight, gate=gate
        )
    return out


def cv_table(cache: str) -> list[str]:
    """One line per variant, best objective first."""
    if Path(cache).exists():
        folds, keys = pickle.loads(Path(cache).read_bytes())
    else:
        folds, keys = judge_sets(None)
        Path(cache).write_bytes(pickle.dumps((folds, keys)))
    base = all_arms()
    rankers = {"dense": base["dense"], "adapter": base[SHIPPED]}
    rankers.update({name: vote_arm(v) for name, v in grid().items()})
    scores: dict[str, dict[str, np.ndarray]] = {}
    for arm, rank in rankers.items():
        scores[arm] = {}
        for s in folds:
            found = per_request(folds[s], rank=rank, key=keys[s][0], scoring=keys[s][1])
            flat = [[r["top1"], r["@5"], r["@10"]] for fold in found for r in fold]
            scores[arm][s] = np.asarray(flat).sum(axis=1)
    lines = []
    for arm in sorted(rankers, key=lambda a: -np.mean([scores[a][s].mean() for s in folds])):
        cells = []
        for s in folds:
            lift = scores["adapter"][s].mean() - scores["dense"][s].mean()
            share = (scores[arm][s].mean() - scores["dense"][s].mean()) / lift
            diff = scores[arm][s] - scores["fitted"][s]
            se = diff.std(ddof=1) / math.sqrt(len(diff))
            cells.append(
                f"{s} {scores[arm][s].mean():.3f} share {share:.2f} "
                f"vs fitted {diff.mean():+.3f} ± {se:.3f}"
            )
        lines.append(f"{arm} | " + " | ".join(cells))
    return lines


def test_halves(cache: str, names: list[str]) -> dict[str, Any]:
    """Per set and point: the test half's searches right after the runs and after one
    consolidation (pickled to ``cache``)."""
    embedder: Any = _CachedEmbedder(get_embedder(Settings()))  # memoised queries
    out: dict[str, Any] = {}
    for ds in all_sets():
        if ds.name not in names:
            continue
        started = time.time()
        key = {t.id: (t.name if ds.by == "name" else t.id) for t in ds.tools}
        docs = [f"{t.name}: {t.description}" for t in ds.tools]
        reference = np.asarray(embedder.encode_reference(docs), np.float32)
        learn, test = learning_split(ds.queries)
        points: dict[float, Any] = {}
        with bench_database() as (url, _), connect(url) as conn:
            vectors = np.asarray(embedder.embed(indexed_texts(ds.tools)))
            index_tools(conn, tools=ds.tools, vectors=vectors)
            conn.commit()
            for fraction in FRACTIONS:
                tenant = f"{TENANT}-{int(fraction * 100)}"
                upto = min(len(learn), round(fraction * len(ds.queries)))
                conn.autocommit = False
                learn_from(conn, embedder=embedder, dataset=ds, queries=learn[:upto], tenant=tenant)
                conn.autocommit = True
                vote = judge(
                    conn,
                    embedder=embedder,
                    dataset=ds,
                    queries=test,
                    reference=reference,
                    tenant=tenant,
                    adapted=True,
                )
                conn.autocommit = False
                fit = consolidate_tenant(conn, tenant_id=tenant)
                conn.commit()
                conn.autocommit = True
                once = judge(
                    conn,
                    embedder=embedder,
                    dataset=ds,
                    queries=test,
                    reference=reference,
                    tenant=tenant,
                    adapted=True,
                )
                shipped = fit.adapter.shipped if fit.adapter else None
                points[fraction] = {"vote": vote, "cons": once, "shipped": shipped}
        out[ds.name] = {"key": key, "scoring": ds.scoring, "points": points}
        print(ds.name, round(time.time() - started), "s", file=sys.stderr, flush=True)
        Path(cache).write_bytes(pickle.dumps(out))
    return out


def test_table(measured: dict[str, Any]) -> list[str]:
    """Per set and point: dense, the fitted vote and ``CANDIDATE`` (top-1 / @5) right after
    the runs and after one consolidation, their paired difference and the vote's share."""

    def rows(judged: Any, key: Any, scoring: str, vote: Vote) -> np.ndarray:
        ranked = [
            fused(revote(j.evidence, vote=vote), key, vote_weight=vote.weight) for j in judged
        ]
        found = [
            bench_metrics(r, j.gold, scoring=scoring) for r, j in zip(ranked, judged, strict=True)
        ]
        return np.asarray([[m["top1"], m["@5"]] for m in found])

    lines = []
    for name, d in measured.items():
        for fraction, p in d["points"].items():
            dense = np.asarray(
                [
                    [
                        bench_metrics(j.dense, j.gold, scoring=d["scoring"])[k]
                        for k in ("top1", "@5")
                    ]
                    for j in p["vote"]
                ]
            )
            old, new = (rows(p["vote"], d["key"], d["scoring"], v) for v in (FITTED, CANDIDATE))
            old1, new1 = (rows(p["cons"], d["key"], d["scoring"], v) for v in (FITTED, CANDIDATE))
            diff = new.sum(1) - old.sum(1)
            noise = max(2 * diff.std(ddof=1) / math.sqrt(len(diff)), 1 / len(diff))

            def lift(a: np.ndarray, dense: np.ndarray = dense) -> float:
                return float(a.sum(1).mean() - dense.sum(1).mean())

            def share(v: np.ndarray, c: np.ndarray) -> str:
                return f"{lift(v) / lift(c):.2f}" if lift(c) > 0 else "-"

            def pair(a: np.ndarray) -> str:
                return f"{a[:, 0].mean():.3f}/{a[:, 1].mean():.3f}"

            lines.append(
                f"{name} | {int(fraction * 100)}% | {len(dense)} | {pair(dense)} | {pair(old)} | "
                f"{pair(new)} | {diff.mean():+.3f} ± {noise:.3f} | {pair(old1)} | {pair(new1)} | "
                f"{p['shipped']} | {share(old, old1)} → {share(new, new1)}"
            )
    return lines


if __name__ == "__main__":
    from shared.offline import go_offline

    go_offline()
    argv = sys.argv[1:]
    if argv[0] == "--cv":
        print("\n".join(cv_table(argv[1])))
    else:
        cache = argv[1]
        if len(argv) > 2:
            test_halves(cache, argv[2].split(","))
        print("\n".join(test_table(pickle.loads(Path(cache).read_bytes()))))
