"""K-fold cross-validation over the learning half (issue 31, round five; bench only).

Rounds three and four chose on two validation slices (≈ one request per tool) and twice
picked a variant that won there by 0.004-0.017 and lost on the test halves. Here every
learning request is validation once: each tool's learning requests are dealt round the
``K`` folds from a random start (stratified by tool, as ``learning_split`` deals a tool's
requests between the halves), each fold's other requests are stored as a tenant's runs
and the fold's requests searched against it, and the deal is repeated with ``REPEATS``
seeds. The objective is top-1 + @5 + @10, averaged over the requests of a (set, fold),
then over the sets fitted on, then over folds; its noise is reported two ways: the
spread of the folds, and the standard error of each arm's paired difference from the
shipped setting (per request, averaged over repeats, then per set). A difference smaller
than twice that standard error is not a win. Only ``datasets.LEARNED_TUNING`` is searched
here (round six); the look-after sets (``datasets.LOOK_AFTER``) never are.
The arms are ``arms``'.

Run: ``python -m research.search.cv [--cache PATH] [set ...]`` (prints JSON).
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deploy.bench.database import bench_database, index_tools
from deploy.bench.datasets import Query, SearchSet
from deploy.bench.search_recall import indexed_texts, learning_split
from research.search.arms import SHIPPED, Ranker, arms
from research.search.datasets import LEARNED_TUNING, all_sets
from research.search.fit import Judged, average, metrics
from research.search.issue_arms import issue_arms
from research.search.recall import validate_against
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder

K = 4  # folds: a fold's fit part holds 3/4 of the learning half (~1.9 requests per tool on issue31)
REPEATS = 2  # deals of the learning half into folds (seeds 0..REPEATS-1)
CV_TENANT = "bench-cv"  # + repeat and fold


def cv_folds(learn: Sequence[Query], *, k: int = K, seed: int = 0) -> list[list[Query]]:
    """The learning half dealt into ``k`` folds, each tool's requests round the folds from a
    random start (a tool learned once is validation in one fold, unknown to that fold's fit,
    as a test request for a tool with no learned run is)."""
    rng = random.Random(seed)
    groups: dict[str, list[Query]] = {}
    for q in learn:
        groups.setdefault(sorted(q.gold)[0], []).append(q)
    folds: list[list[Query]] = [[] for _ in range(k)]
    for tool in sorted(groups):
        members = groups[tool][:]
        rng.shuffle(members)
        start = rng.randrange(k)
        for i, q in enumerate(members):
            folds[(start + i) % k].append(q)
    return folds


@dataclass(frozen=True)
class Fold:
    """One fold's validation requests, searched against a tenant that learned the others."""

    repeat: int
    fold: int
    judged: list[Judged]


def judge_folds(*, embedder: Embedder, dataset: SearchSet) -> list[Fold]:
    """Every repeat x fold of ``dataset``'s learning half, searched as ``bench search`` does."""
    docs = [f"{t.name}: {t.description}" for t in dataset.tools]
    reference = np.asarray(embedder.encode_reference(docs), np.float32)
    # As the toolhost indexes them (with the server's name), so the in-memory adapter
    # trains on the vectors the product's does.
    indexed = np.asarray(embedder.embed(indexed_texts(dataset.tools)), np.float32)
    descriptions = {t.id: v for t, v in zip(dataset.tools, indexed, strict=True)}
    learn, _test = learning_split(dataset.queries)
    out: list[Fold] = []
    with bench_database() as (url, _settings), connect(url) as conn:
        index_tools(conn, tools=dataset.tools, vectors=indexed)
        conn.commit()
        for repeat in range(REPEATS):
            folds = cv_folds(learn, seed=repeat)
            for f, validation in enumerate(folds):
                judged = validate_against(
                    conn,
                    embedder=embedder,
                    dataset=dataset,
                    fit_part=[q for g, fold in enumerate(folds) if g != f for q in fold],
                    validation=validation,
                    tenant=f"{CV_TENANT}{repeat}-{f}",
                    reference=reference,
                    descriptions=descriptions,
                )
                out.append(Fold(repeat=repeat, fold=f, judged=judged))
    return out
    return out


# --- the objective and its noise -------------------------------------------------------------


def per_request(
    folds: Sequence[Fold], *, rank: Ranker, key: Mapping[str, str], scoring: str
) -> list[list[dict[str, float]]]:
    """Per fold, each validation request's top-1 / @5 / @10 under ``rank``."""
    return [[metrics(rank(j, key), j.gold, scoring=scoring) for j in fold.judged] for fold in folds]


def summarise(
    scores: Mapping[str, Mapping[str, list[list[dict[str, float]]]]],
    *,
    folds: Mapping[str, Sequence[Fold]],
    baseline: str = SHIPPED,
) -> list[dict[str, Any]]:
    """Per arm: the objective (mean over folds of the mean over sets), the folds' standard
    deviation, and the paired difference from ``baseline`` with its standard error (per
    request averaged over repeats; per set sqrt(var / n); over sets the root sum of squares
    divided by the number of sets)."""
    rows: list[dict[str, Any]] = []
    sets = sorted(next(iter(scores.values())))
    n_folds = len(next(iter(folds.values())))
    for arm, per_set in scores.items():
        by_fold = [
            float(np.mean([_mean_total(per_set[s][f]) for s in sets])) for f in range(n_folds)
        ]
        variances = []
        means = []
        for s in sets:
            diffs: dict[tuple[float, ...], list[float]] = {}
            for f, fold in enumerate(folds[s]):
                for j, mine, theirs in zip(
                    fold.judged, per_set[s][f], scores[baseline][s][f], strict=True
                ):
                    gain = sum(mine.values()) - sum(theirs.values())
                    diffs.setdefault(_request_key(j), []).append(gain)
            d = np.array([np.mean(v) for v in diffs.values()])
            means.append(float(d.mean()) if len(d) else 0.0)
            variances.append(float(d.var(ddof=1) / len(d)) if len(d) > 1 else 0.0)
        rows.append(
            {
                "arm": arm,
                "objective": round(float(np.mean(by_fold)), 4),
                "fold_sd": round(float(np.std(by_fold, ddof=1)), 4),
                "vs_shipped": round(float(np.mean(means)), 4),
                "vs_shipped_se": round(float(np.sqrt(sum(variances))) / len(sets), 4),
                "sets": {s: average([x for fold in per_set[s] for x in fold]) for s in sets},
            }
        )
    rows.sort(key=lambda r: -float(r["objective"]))
    return rows


def _mean_total(rows: Sequence[Mapping[str, float]]) -> float:
    return float(np.mean([sum(r.values()) for r in rows])) if rows else 0.0


def _request_key(j: Judged) -> tuple[float, ...]:
    """A request's identity across repeats (its embedding, the same in every fold)."""
    assert j.vector is not None
    return tuple(np.round(np.asarray(j.vector[:8], np.float64), 6))


def cv_run(names: Sequence[str] | None = None, *, cache: str | None = None) -> dict[str, Any]:
    """The CV over the sets weights may be tuned to or that can measure learning (never the
    held-out set): each arm's objective, noise and per-set scores (with ``cache``, a pickle
    of the folds' searches read if present, else written: arms can be added and rescored
    without the database)."""
    if cache and Path(cache).exists():
        folds, keys = pickle.loads(Path(cache).read_bytes())
    else:
        folds, keys = judge_sets(names)
        if cache:
            Path(cache).write_bytes(pickle.dumps((folds, keys)))
    scores = {
        arm: {
            s: per_request(folds[s], rank=rank, key=keys[s][0], scoring=keys[s][1]) for s in folds
        }
        for arm, rank in {**arms(), **issue_arms()}.items()
    }
    return {
        "benchmark": "search-learned-cv",
        "folds": K,
        "repeats": REPEATS,
        "sets": {s: sum(len(f.judged) for f in fs) // REPEATS for s, fs in folds.items()},
        "arms": summarise(scores, folds=folds),
    }


def judge_sets(
    names: Sequence[str] | None,
) -> tuple[dict[str, list[Fold]], dict[str, tuple[dict[str, str], str]]]:
    """Every CV set's folds, searched, and its (tool id → gold key, scoring)."""
    embedder = get_embedder(Settings())
    folds: dict[str, list[Fold]] = {}
    keys: dict[str, tuple[dict[str, str], str]] = {}
    for dataset in all_sets():
        # Round six: the tuning sets only (decided before the BFCL sets' results were seen);
        # ``datasets.LOOK_AFTER`` (more_servers, bfcl_multi) is never searched here.
        if dataset.name not in LEARNED_TUNING or (names and dataset.name not in names):
            continue
        folds[dataset.name] = judge_folds(embedder=embedder, dataset=dataset)
        key = {t.id: (t.name if dataset.by == "name" else t.id) for t in dataset.tools}
        keys[dataset.name] = (key, dataset.scoring)
    return folds, keys


if __name__ == "__main__":
    import json
    import sys

    from shared.offline import go_offline

    go_offline()
    # --cache PATH: keep the folds' searches in PATH (bench work only; delete to re-search).
    args = sys.argv[1:]
    cache = args[args.index("--cache") + 1] if "--cache" in args else None
    names = [a for a in args if a != "--cache" and a != cache]
    print(json.dumps(cv_run(names or None, cache=cache), indent=2))
