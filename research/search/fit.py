"""Fitting the fusion weights on a tuning split (the scoring is ``bench search``'s).

The fit is coordinate ascent over a grid per weight: it maximises the mean over sets of
top-1 + @5 + @10 and refuses any weights under which a set's metric falls below its
dense baseline, so the result is never worse than dense where it was fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from deploy.bench.search_recall import KS, average, dense_metrics, evaluate, hybrid_ranking, metrics
from deploy.bench.search_recall import Judged as Searched
from shared.search.fusion import FEATURES
from shared.search.tool_vectors import Run

__all__ = [
    "KS",
    "Judged",
    "Learned",
    "average",
    "dense_metrics",
    "evaluate",
    "fit",
    "hybrid_ranking",
    "metrics",
    "per_point",
]

GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3, 0.5)
PASSES = 3


@dataclass(frozen=True)
class Judged(Searched):
    """One query as ``bench search`` judges it, and what the tenant had learned when it was
    searched (tool id → description embedding, learned runs): the tool-vector arms' input."""

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
