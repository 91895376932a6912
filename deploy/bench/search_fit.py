"""Scoring rankings against gold, and fitting the fusion weights on a tuning split.

The fit is coordinate ascent over a grid per weight: it maximises the mean over sets of
top-1 + @5 + @10 and refuses any weights under which a set's metric falls below its
dense baseline, so the result is never worse than dense where it was fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from shared.search.fusion import FEATURES, fuse
from shared.search.hybrid import Evidence
from shared.search.tool_vectors import Run

KS = (1, 5, 10)
GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3, 0.5)
PASSES = 3


@dataclass(frozen=True)
class Judged:
    """One query's evidence, gold, and its dense-baseline ranking (tool keys)."""

    evidence: Evidence
    gold: frozenset[str]
    dense: list[str]
    # The query's embedding and what the tenant had learned when it was searched (tool
    # id → description embedding, learned runs): the tool-vector arms' input (issue 31).
    vector: np.ndarray | None = None
    learned: Learned | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Learned:
    """A tenant's learned runs at one point of the protocol, and the catalogue's description
    embeddings (tool id → vector), shared by the judged queries searched at that point."""

    descriptions: Mapping[str, np.ndarray]
    runs: Sequence[Run]


T = TypeVar("T")
_PER_POINT: dict[tuple[int, Hashable], tuple[Learned, Any]] = {}


def per_point(learned: Learned, key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, computed once per protocol point ``learned`` and ``key`` (what an arm
    derives from a point's runs: an adapter, prototypes, tool vectors). The point is kept with
    its value, so no other point can be served it through a reused ``id``."""
    slot = (id(learned), key)
    hit = _PER_POINT.get(slot)
    if hit is None or hit[0] is not learned:
        hit = _PER_POINT[slot] = (learned, make())
    value: T = hit[1]
    return value


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


def fit(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]],
    *,
    features: Sequence[str] = FEATURES,
    base: Mapping[str, float] | None = None,
    grid: Sequence[float] = GRID,
) -> dict[str, float]:
    """Weights maximising Σ metrics over sets with no set's metric below its dense baseline.

    ``sets``: name → (judged tuning queries, tool id → gold key, scoring); ``features`` are
    fitted from 0, the others kept at ``base`` (default 0).
    """
    floors = {name: dense_metrics(j, scoring=s) for name, (j, _, s) in sets.items()}

    def objective(weights: Mapping[str, float]) -> float | None:
        total = 0.0
        for name, (judged, key, scoring) in sets.items():
            got = evaluate(judged, weights=weights, key=key, scoring=scoring)
            if any(got[m] < floors[name][m] for m in got):
                return None
            total += sum(got.values())
        return total

    weights = {f: 0.0 if f in features else (base or {}).get(f, 0.0) for f in FEATURES}
    best = objective(weights)
    best = best if best is not None else float("-inf")
    for _ in range(PASSES):
        moved = False
        for feature in features:
            for value in grid:
                trial = {**weights, feature: value}
                score = objective(trial)
                if score is not None and score > best + 1e-9:
                    best, weights, moved = score, trial, True
        if not moved:
            break
    return weights
