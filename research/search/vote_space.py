"""The vote beside the query adapter, in the adapter's space (issue 31, round four; bench only).

In the product the vote reads only the runs the adapter has not consolidated, with the
query as embedded; at the protocol's 50 % every run is consolidated, so the vote says
nothing there. These arms let it read every learned run again, computed in memory from
the protocol point's runs (``Learned.runs``), in one of three spaces:

``raw``    the query as embedded against the intents as stored (the vote before the
           watermark; round three found it double-counts beside the adapter);
``query``  the adapted query against the intents as stored (the product could do this with
           the statement it already sends: no new round trip);
``both``   the NEIGHBOURS nearest intents to the adapted query, re-scored as cosines between
           the adapted query and the adapted intents (the product could read the intents'
           embeddings in the same statement and map those 20 by W: no new round trip).

and with a fusion weight that grows with the tenant's evidence (runs per catalogue tool,
``r``): ``weight x r / (r + half)`` (``half`` 0: the constant weight). Everything is
judged on the validation slices only (``recall --vote-space``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from research.search.adapter import Capacity, train_adapter, with_adapter
from research.search.fit import Judged, evaluate
from research.search.learned import revote
from shared.search.fusion import WEIGHTS
from shared.search.hybrid import Evidence
from shared.search.learned import FITTED, NEIGHBOURS, Vote

SPACES = ("raw", "query", "both")
VOTE_WEIGHTS = (0.1, 0.3, 0.8, 1.5)
GATES = (None, -0.1, -0.05, 0.0)
HALVES = (0.0, 0.25, 1.0, 4.0)  # runs per tool at which the vote has half its weight
ADAPTER = Capacity()  # the adapter in use (decay, epochs, tau as shipped)

Rows = tuple[dict[str, Any], ...]
_PREPARED: dict[tuple[int, str], tuple[Evidence, float]] = {}


def _unit_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.asarray(m / np.where(norms > 0, norms, 1.0), np.float32)


def intents_in(judged: Judged, *, space: str) -> Rows:
    """The nearest learned runs as rows a search reads (sim, tools_ok, tools_failed,
    age_days), the cosine computed in ``space``."""
    learned = judged.learned
    assert learned is not None and judged.vector is not None
    raw_q = np.asarray(judged.vector, np.float32)
    intents = _unit_rows(np.stack([np.asarray(r.vector, np.float32) for r in learned.runs]))
    if space == "raw":
        sims = intents @ raw_q
        top = np.argsort(-sims, kind="stable")[:NEIGHBOURS]
    else:
        w = train_adapter(learned, capacity=ADAPTER)
        q = w @ raw_q
        q /= float(np.linalg.norm(q)) or 1.0
        sims = intents @ q
        top = np.argsort(-sims, kind="stable")[:NEIGHBOURS]
        if space == "both":
            mapped = _unit_rows(intents[top] @ w.T)
            sims = np.zeros(len(intents), np.float32)
            sims[top] = mapped @ q
    return tuple(
        {"sim": float(sims[i]), "tools_ok": list(learned.runs[i].tools), "tools_failed": []}
        | {"age_days": 0.0}
        for i in top
    )


def prepared(judged: Judged, *, space: str) -> tuple[Evidence, float]:
    """The evidence with the adapter applied and the intents read in ``space`` (every
    voted tool a candidate, as the search makes it), and the tenant's runs per tool."""
    cache = (id(judged), space)
    if cache not in _PREPARED:
        learned = judged.learned
        if learned is None or judged.vector is None or not learned.runs:
            _PREPARED[cache] = (judged.evidence, 0.0)
        else:
            evidence = with_adapter(judged, adapter=ADAPTER)
            rows = intents_in(judged, space=space)
            features = {tool: dict(values) for tool, values in evidence.features.items()}
            for row in rows:
                for tool in row["tools_ok"]:
                    features.setdefault(tool, {})
            ratio = len(learned.runs) / max(1, len(learned.descriptions))
            _PREPARED[cache] = (replace(evidence, intents=rows, features=features), ratio)
    return _PREPARED[cache]


def score_space(
    judged: Sequence[Judged],
    *,
    space: str,
    vote: Vote,
    half: float,
    key: Mapping[str, str],
    scoring: str,
) -> dict[str, float]:
    """Metrics with the adapter and the vote read in ``space``, its weight ``vote.weight``
    scaled by r / (r + ``half``) (r: the tenant's runs per tool)."""
    revoted = []
    for j in judged:
        evidence, ratio = prepared(j, space=space)
        evidence = revote(evidence, vote=vote)
        scale = 1.0 if half <= 0 else ratio / (ratio + half)
        features = {
            tool: {k: v * scale if k == "learned" else v for k, v in values.items()}
            for tool, values in evidence.features.items()
        }
        revoted.append(replace(j, evidence=replace(evidence, features=features)))
    return evaluate(revoted, weights={**WEIGHTS, "learned": vote.weight}, key=key, scoring=scoring)


def vote_space_grid(
    sets: Mapping[str, tuple[Sequence[Judged], Mapping[str, str], str]],
    *,
    fitted_on: Sequence[str],
) -> dict[str, Any]:
    """Every (space, gate, weight, half) on every set's validation slice beside the adapter
    in use, against the adapter alone (the product at 50 %): per row the objective (mean
    over ``fitted_on`` of top-1 + @5 + @10) and each set's metrics; rows with a set's metric
    below the adapter alone (beyond 0.005) are marked."""
    base = {
        name: score_space(
            judged, space="raw", vote=replace(FITTED, weight=0.0), half=0, key=key, scoring=scoring
        )
        for name, (judged, key, scoring) in sets.items()
    }

    def objective(per_set: Mapping[str, Mapping[str, float]]) -> float:
        return round(sum(sum(per_set[n].values()) for n in fitted_on) / max(1, len(fitted_on)), 4)

    rows: list[dict[str, Any]] = []
    for space, gate, weight, half in itertools.product(SPACES, GATES, VOTE_WEIGHTS, HALVES):
        vote = replace(FITTED, gate=gate, weight=weight)
        per_set = {
            name: score_space(judged, space=space, vote=vote, half=half, key=key, scoring=scoring)
            for name, (judged, key, scoring) in sets.items()
        }
        below = [n for n in per_set if any(per_set[n][m] < base[n][m] - 0.005 for m in per_set[n])]
        rows.append(
            {
                "space": space,
                "gate": gate,
                "weight": weight,
                "half": half,
                "objective": objective(per_set),
                "below_adapter_alone": below,
                "sets": per_set,
            }
        )
    rows.sort(key=lambda r: -float(r["objective"]))
    best_by_space = {
        s: next((r for r in rows if r["space"] == s and not r["below_adapter_alone"]), None)
        for s in SPACES
    }
    return {
        "fitted_on": list(fitted_on),
        "adapter_alone": {"objective": objective(base), "sets": base},
        "best_allowed_by_space": best_by_space,
        "top_ten": rows[:10],
    }
