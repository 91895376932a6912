"""`bench search` widened: every research set, dense beside hybrid, ablations, fitted weights,
every in-memory arm on the learning curve, and latency beside the variants not shipped.

Zero-shot: each query's evidence is gathered once (``gather_evidence``, as a search
does); hybrid rankings for any weights are then computed in memory, so ablations
(each feature alone, each left out) and the fit cost no extra database work.
Learned: ``bench search``'s protocol (``deploy.bench.search_recall``): a set's requests are
split by gold tool into a learning half and a test half (seeded), learning requests stored
as finished executions and ingested as the learning worker does; the test half is searched
after 0, 10, 25 and 50 % of all requests.

Run: ``python -m research.search.recall --bench`` (everything, as ``bench search`` once
reported it), ``--fit`` / ``--adapter-grid`` / ``--vote-space`` (the validation slices only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg

from deploy.bench import search_recall as shipped
from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import Query, SearchSet
from deploy.bench.search import (
    LATENCY_EDGES,
    LATENCY_INTENTS,
    LATENCY_QUERIES,
    LATENCY_TOOLS,
    latency,
)
from deploy.bench.search_recall import (
    TENANT,
    learn_from,
    learning_per_tool,
    learning_points,
    learning_split,
    tool_ids,
)
from research.search.adapter import FITTED_DECAY
from research.search.arms import curve_arms, ranked_metrics
from research.search.datasets import LOOK_AFTER, all_sets
from research.search.fit import Judged, Learned, dense_metrics, evaluate, fit
from research.search.issue_arms import issue_arms
from research.search.learned import (
    ALONE_MIX,
    FIT_TENANT,
    FOLDS,
    NO_VOTE,
    ablation,
    adapter_grid,
    fit_adapter,
    fit_mix,
    fit_vote,
    score,
    validation_split,
)
from research.search.vote_space import vote_space_grid
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.search.fusion import FEATURES, UNMEASURED, WEIGHTS
from shared.search.learned import FITTED, LEGACY, UNGATED
from shared.search.tool_vectors import Run

LEARNED_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0)
# The in-memory arms of the learning curve (every run learned so far, no hold-out check):
# arm → how ``score`` ranks it (the vote, the tool vectors' mix, the adapter's decay).
CURVE_ARMS: dict[str, dict[str, Any]] = {
    "legacy": {"vote": LEGACY},
    "ungated": {"vote": UNGATED},
    "learned": {"vote": FITTED},
    "tool_vectors": {"vote": NO_VOTE, "mix": ALONE_MIX},
    "adapter": {"vote": NO_VOTE, "adapter": FITTED_DECAY},
    "adapter_and_vote": {"vote": FITTED, "adapter": FITTED_DECAY},
}


def judge(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    dataset: SearchSet,
    queries: Sequence[Query],
    reference: np.ndarray,
    tenant: str = TENANT,
    learned: Learned | None = None,
    adapted: bool = False,
) -> list[Judged]:
    """``bench search``'s judged queries, each with what the tenant had learned (``learned``)
    for the in-memory arms."""
    searched = shipped.judge(
        conn,
        embedder=embedder,
        dataset=dataset,
        queries=queries,
        reference=reference,
        tenant=tenant,
        adapted=adapted,
    )
    return [
        Judged(evidence=j.evidence, gold=j.gold, dense=j.dense, vector=j.vector, learned=learned)
        for j in searched
    ]


def ablations(judged: Sequence[Judged], *, key: dict[str, str], scoring: str) -> dict[str, Any]:
    """Fitted weights with each feature alone, and with each left out."""
    out: dict[str, Any] = {}
    for feature in FEATURES:
        if WEIGHTS.get(feature, 0.0) == 0.0:
            continue
        alone = {f: (w if f == feature else 0.0) for f, w in WEIGHTS.items()}
        without = {**WEIGHTS, feature: 0.0}
        out[f"only_{feature}"] = evaluate(judged, weights=alone, key=key, scoring=scoring)
        out[f"without_{feature}"] = evaluate(judged, weights=without, key=key, scoring=scoring)
    return out


def learned_runs(
    *, embedder: Embedder, dataset: SearchSet, queries: Sequence[Query], descriptions: Any
) -> Learned:
    """The runs ``learn_from`` stores, as the consolidation reads them (intent embedding,
    gold tools' ids), in learning order."""
    ids_of = tool_ids(dataset)
    vectors = np.asarray(embedder.embed([q.text for q in queries]), np.float32)
    runs = [
        Run(order=i, vector=v, tools=tuple(ids_of[g] for g in sorted(q.gold)))
        for i, (q, v) in enumerate(zip(queries, vectors, strict=True))
    ]
    return Learned(descriptions=descriptions, runs=runs)


def validate_against(
    conn: psycopg.Connection[Any],
    *,
    embedder: Embedder,
    dataset: SearchSet,
    fit_part: Sequence[Query],
    validation: Sequence[Query],
    tenant: str,
    reference: np.ndarray,
    descriptions: Any,
) -> list[Judged]:
    """``fit_part`` stored as ``tenant``'s runs, then ``validation`` searched against them
    (with what the tenant learned, for the in-memory arms)."""
    learn_from(conn, embedder=embedder, dataset=dataset, queries=fit_part, tenant=tenant)
    conn.autocommit = True
    judged = judge(
        conn,
        tenant=tenant,
        queries=validation,
        embedder=embedder,
        dataset=dataset,
        reference=reference,
        learned=learned_runs(
            embedder=embedder, dataset=dataset, queries=fit_part, descriptions=descriptions
        ),
    )
    conn.autocommit = False
    return judged


def run_set(*, embedder: Embedder, dataset: SearchSet, test: bool = True) -> dict[str, Any]:
    """Zero-shot (per split, with ablations), the learned protocol's validation slice
    (searched against the fit part, another tenant) and, unless ``test`` is False, the
    learning curve on the test half."""
    key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
    docs = [f"{t.name}: {t.description}" for t in dataset.tools]
    reference = np.asarray(embedder.encode_reference(docs), np.float32)
    out: dict[str, Any] = {"tools": len(dataset.tools), "queries": len(dataset.queries)}
    learn, test_half = learning_split(dataset.queries)
    folds = [validation_split(learn, fold=f) for f in range(FOLDS)]
    indexed = np.asarray(embedder.embed(docs), np.float32)
    descriptions = {t.id: v for t, v in zip(dataset.tools, indexed, strict=True)}
    with bench_database() as (url, _settings), connect(url) as conn:
        index_tools(conn, tools=dataset.tools, vectors=indexed)
        conn.autocommit = True
        zero: dict[str, list[Judged]] = {}
        for split in ("tune", "holdout"):
            zero[split] = judge(
                conn,
                embedder=embedder,
                dataset=dataset,
                queries=[q for q in dataset.queries if q.split == split],
                reference=reference,
            )
        conn.autocommit = False
        validated: list[Judged] = []
        for fold, (fit_part, validation) in enumerate(folds):
            validated += validate_against(
                conn,
                embedder=embedder,
                dataset=dataset,
                fit_part=fit_part,
                validation=validation,
                tenant=f"{FIT_TENANT}{fold}",
                reference=reference,
                descriptions=descriptions,
            )
        curve: list[dict[str, Any]] = []
        points = learning_points(conn, embedder=embedder, dataset=dataset, learn=learn)
        for fraction, upto, consolidation in points if test else ():
            learned_here = learned_runs(
                embedder=embedder,
                dataset=dataset,
                queries=learn[:upto],
                descriptions=descriptions,
            )
            product = judge(
                conn,
                embedder=embedder,
                dataset=dataset,
                queries=test_half,
                reference=reference,
                learned=learned_here,
                adapted=True,
            )
            judged = judge(
                conn,
                embedder=embedder,
                dataset=dataset,
                queries=test_half,
                reference=reference,
                learned=learned_here,
            )
            adapter_fit = consolidation.adapter if consolidation else None
            curve.append(
                {
                    "fraction": fraction,
                    "learned_executions": upto,
                    "judged": judged,
                    "product": product,
                    "adapter_fit": vars(adapter_fit) if adapter_fit else None,
                }
            )
    out["zero_shot"] = {}
    for split, judged in zero.items():
        out["zero_shot"][split] = {
            "queries": len(judged),
            "dense": dense_metrics(judged, scoring=dataset.scoring),
            "hybrid": evaluate(judged, weights=WEIGHTS, key=key, scoring=dataset.scoring),
            "ablation": ablations(judged, key=key, scoring=dataset.scoring),
        }
    per_tool = learning_per_tool(learn, test_half)
    out["learned"] = {
        "learning_requests_per_tool": per_tool,
        # The targets apply where the learning half holds two requests per tool or more.
        "can_measure_learning": per_tool >= 2.0,
        "validation": {
            "fit_part": [len(f) for f, _ in folds],
            "queries": len(validated),
            "dense": dense_metrics(validated, scoring=dataset.scoring),
            "ablation": ablation(validated, key=key, scoring=dataset.scoring),
        },
        "test_queries": len(test_half),
        "curve": [
            {
                "fraction": point["fraction"],
                "learned_executions": point["learned_executions"],
                "dense": dense_metrics(point["judged"], scoring=dataset.scoring),
                "zero_shot": evaluate(
                    point["judged"],
                    weights={**WEIGHTS, "learned": 0.0},
                    key=key,
                    scoring=dataset.scoring,
                ),
                **{
                    arm: score(point["judged"], key=key, scoring=dataset.scoring, **how)
                    for arm, how in CURVE_ARMS.items()
                },
                # Round five's arms (``cv``), in memory as the ones above.
                **{
                    arm: ranked_metrics(
                        point["judged"], rank=rank, key=key, scoring=dataset.scoring
                    )
                    for arm, rank in curve_arms().items()
                },
                # Round six: the issue's arms (signal alone), and each in the product's fusion.
                **{
                    arm: ranked_metrics(
                        point["judged"], rank=rank, key=key, scoring=dataset.scoring
                    )
                    for arm, rank in issue_arms().items()
                },
                # What the product does: searched after the consolidation, its adapter (if it
                # shipped) applied by the search, the fitted vote in the fusion.
                "product": evaluate(
                    point["product"], weights=WEIGHTS, key=key, scoring=dataset.scoring
                ),
                "adapter_fit": point["adapter_fit"],
            }
            for point in curve
        ],
    }
    if curve:
        out["learned"]["test_ablation_at_50"] = ablation(
            curve[-1]["judged"], key=key, scoring=dataset.scoring
        )
    out["_judged"] = {
        "zero": zero,
        "curve": curve,
        "validation": validated,
        "test": test_half,
        "key": key,
        "scoring": dataset.scoring,
    }
    return out


def validation_run(*, fit: bool, grid: bool = False, vote_space: bool = False) -> dict[str, Any]:
    """Every set's validation slice and its ablation (no test half is searched), and with
    ``fit`` the vote fitted on the slices of the sets that can measure learning or are tuned;
    with ``grid`` the adapter's capacity grid on those slices, with ``vote_space`` the vote
    beside the adapter in its space (``vote_space``) (with either, the look-after sets,
    ``datasets.LOOK_AFTER``, are not searched at all; they are never fitted on)."""
    embedder = get_embedder(Settings())
    out: dict[str, Any] = {"benchmark": "search-learned-validation", "sets": {}}
    slices = {}
    for dataset in all_sets():
        if (grid or vote_space) and dataset.name in LOOK_AFTER:
            continue
        result = run_set(embedder=embedder, dataset=dataset, test=False)
        out["sets"][dataset.name] = {
            "learning_requests_per_tool": result["learned"]["learning_requests_per_tool"],
            "can_measure_learning": result["learned"]["can_measure_learning"],
            "validation": result["learned"]["validation"],
        }
        # Fitted on: the sets that can measure learning and those weights may be tuned to
        # (never a look-after set: more_servers, bfcl_multi).
        if dataset.name not in LOOK_AFTER and (
            result["learned"]["can_measure_learning"] or dataset.tuned
        ):
            judged = result["_judged"]
            slices[dataset.name] = (judged["validation"], judged["key"], judged["scoring"])
    if fit:
        # The vote in the product's setting: beside the adapter the same runs train.
        out["fit"] = {"sets": sorted(slices), **fit_vote(slices, adapter=FITTED_DECAY)}
        out["fit_without_adapter"] = {"sets": sorted(slices), **fit_vote(slices)}
        # The tool vectors' (k, weight): alone (no vote), and beside the vote in use.
        out["fit_tool_vectors"] = {"sets": sorted(slices), **fit_mix(slices)}
        out["fit_combined"] = {"sets": sorted(slices), **fit_mix(slices, vote=FITTED)}
        out["fit_adapter"] = {"sets": sorted(slices), **fit_adapter(slices)}
    if grid:
        out["adapter_grid"] = adapter_grid(slices, fitted_on=sorted(slices))
    if vote_space:
        out["vote_space"] = vote_space_grid(slices, fitted_on=sorted(slices))
    return out


def run(
    *,
    max_tasks: int | None = None,
    latency_tools: int = LATENCY_TOOLS,
    latency_edges: int = LATENCY_EDGES,
    latency_intents: int = LATENCY_INTENTS,
    latency_queries: int = LATENCY_QUERIES,
) -> dict[str, Any]:
    """Every research set with every arm, the weights the tuning splits fit now, and the
    latency of short requests with round one's vote and with the tool vectors read (JSON)."""
    embedder = get_embedder(Settings())
    out: dict[str, Any] = {"benchmark": "search-research", "model": embedder.model_name}
    results = {}
    sets = all_sets()
    for dataset in sets:
        if max_tasks is not None:
            dataset = replace(dataset, queries=dataset.queries[:max_tasks])
        results[dataset.name] = run_set(embedder=embedder, dataset=dataset)
    # Only the sets weights may be tuned to are fitted on: a held-out set just reports.
    tuned = {d.name: results[d.name] for d in sets if d.tuned}
    out["weights_in_use"] = dict(WEIGHTS)
    # What the tuning splits fit now; equal to weights_in_use when the code is up to date.
    out["weights_fitted"] = fitted_weights(tuned)
    out["learned_weight_objective"] = learned_weight_objective(tuned)
    out["sets"] = {
        name: {k: v for k, v in r.items() if k != "_judged"} for name, r in results.items()
    }
    if latency_tools > 0:
        out["latency"] = latency(
            embedder=embedder,
            max_tasks=max_tasks,
            n_tools=latency_tools,
            n_edges=latency_edges,
            n_intents=latency_intents,
            n_queries=latency_queries,
            before={"short_requests": {"legacy_vote": {"vote": LEGACY}}},
            after={"short_requests": {"with_tool_vectors_read": {"tool_vectors": True}}},
        )
    return out


def fitted_weights(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Weights fitted on the tuning splits: zero-shot features on every set's zero-shot
    tuning queries, then the learned vote's weight on the tuning queries of the 50 % curve point."""
    zero = {
        name: (r["_judged"]["zero"]["tune"], r["_judged"]["key"], r["_judged"]["scoring"])
        for name, r in results.items()
    }
    # Graph and PageRank are fixed (fusion.UNMEASURED): no set has context tools or a graph.
    measured = [f for f in FEATURES if f not in ("learned", "toolvec") and f not in UNMEASURED]
    weights = fit(zero, features=measured, base=UNMEASURED)
    learned_sets = {}
    for name, r in results.items():
        point = r["_judged"]["curve"][-1]["judged"]
        tune = [j for j, q in zip(point, r["_judged"]["test"], strict=True) if q.split == "tune"]
        learned_sets[name] = (tune, r["_judged"]["key"], r["_judged"]["scoring"])
    # The learned vote under the same rule: never below dense on any set's tuning queries.
    return fit(learned_sets, features=["learned"], base=weights, grid=LEARNED_GRID)


def learned_weight_objective(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per learned weight (others as in use): Σ over sets of top-1 + @5 + @10 on the tuning
    queries of the 50 % learned point, or None where a set falls below dense. A flat row says
    the sets cannot choose the weight."""
    out: dict[str, Any] = {}
    for value in LEARNED_GRID:
        total: float | None = 0.0
        for r in results.values():
            point = r["_judged"]["curve"][-1]["judged"]
            tune = [
                j for j, q in zip(point, r["_judged"]["test"], strict=True) if q.split == "tune"
            ]
            scoring = r["_judged"]["scoring"]
            got = evaluate(
                tune,
                weights={**WEIGHTS, "learned": value},
                key=r["_judged"]["key"],
                scoring=scoring,
            )
            floor = dense_metrics(tune, scoring=scoring)
            if total is None or any(got[m] < floor[m] for m in got):
                total = None
                continue
            total += sum(got.values())
        out[str(value)] = None if total is None else round(total, 3)
    return out


if __name__ == "__main__":
    import json
    import sys

    from shared.offline import go_offline

    go_offline()
    # The validation slices and the vote's fit (--fit) or the adapter's capacity grid
    # (--adapter-grid) or the vote in the adapter's space (--vote-space); never the test halves.
    flags = set(sys.argv[1:])
    if "--bench" in flags:
        print(json.dumps(run(), indent=2))
    else:
        validated = validation_run(
            fit="--fit" in flags,
            grid="--adapter-grid" in flags,
            vote_space="--vote-space" in flags,
        )
        print(json.dumps(validated, indent=2))
