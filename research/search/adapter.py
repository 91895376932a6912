"""The query adapter's arms in memory (issue 31): ``shared.search.adapter`` at any decay.

The adapter is trained on a protocol point's learned runs as the consolidation trains it
(``shared.search.adapter.train_adapter``), and the dense list recomputed exactly for the
adapted query, so the decay can be fitted and ablated without a database; the product
path (consolidated, read and applied by the search) is measured by ``bench search``'s
``product`` arm.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from research.search.fit import Judged, Learned, per_point
from shared.search.adapter import DECAY, EPOCHS, TAU
from shared.search.adapter import train_adapter as fit
from shared.search.hybrid import MIN_CANDIDATES, Evidence

DECAYS = (0.01, 0.1, 1.0)
FITTED_DECAY = DECAY  # the validation fit's (``fit_adapter`` in recall --fit, 2026-11-26)


@dataclass(frozen=True)
class Capacity:
    """How an adapter is trained: decay toward the identity, Adam steps, softmax temperature."""

    decay: float = DECAY
    epochs: int = EPOCHS
    tau: float = TAU


# The capacity/regularisation grid (``recall --adapter-grid``, validation slices only).
CAPACITIES = tuple(
    Capacity(decay=d, epochs=e, tau=t)
    for d in (0.001, 0.01)
    for e in (EPOCHS, 3 * EPOCHS)
    for t in (0.03, TAU, 0.1)
)


def train_adapter(learned: Learned, *, capacity: Capacity) -> np.ndarray:
    """W fitted on ``learned``'s runs as the consolidation fits it (cached per protocol
    point and ``capacity``)."""
    return per_point(
        learned,
        ("adapter", capacity),
        lambda: fit(
            learned.descriptions,
            learned.runs,
            decay=capacity.decay,
            epochs=capacity.epochs,
            tau=capacity.tau,
        ),
    )


def with_adapter(judged: Judged, *, adapter: float | Capacity) -> Evidence:
    """The evidence with the dense list recomputed for the query adapted (``adapter``: its
    decay, or its whole ``Capacity``) (exact, over the
    catalogue); the other features as searched (they do not depend on the query vector,
    except the clause one, kept as it was)."""
    evidence = judged.evidence
    if judged.learned is None or judged.vector is None or not judged.learned.runs:
        return evidence
    capacity = adapter if isinstance(adapter, Capacity) else Capacity(decay=adapter)
    return mapped_evidence(judged, matrix=train_adapter(judged.learned, capacity=capacity))


def mapped_evidence(judged: Judged, *, matrix: np.ndarray) -> Evidence:
    """The evidence with the dense list recomputed (exact, over the catalogue) for the query
    mapped by ``matrix``; the other features as searched."""
    evidence = judged.evidence
    assert judged.learned is not None and judged.vector is not None
    adapted = matrix @ np.asarray(judged.vector, np.float32)
    adapted /= float(np.linalg.norm(adapted)) or 1.0
    names = list(judged.learned.descriptions)
    catalogue = np.stack([judged.learned.descriptions[t] for t in names])
    sims = catalogue @ adapted
    top = np.argsort(-sims, kind="stable")[:MIN_CANDIDATES]
    dense = {names[i]: float(sims[i]) for i in top}
    features = {tool: dict(values) for tool, values in evidence.features.items()}
    for tool in dense:
        features.setdefault(tool, {})
    return replace(evidence, dense=dense, features=features)
