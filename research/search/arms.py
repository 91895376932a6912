"""Round five's arms (issue 31; bench only): rankings computed in memory from one search.

Each arm is a ``Ranker``: (judged request, tool id → gold key) → gold keys, best first,
from the evidence the search kept and what the tenant had learned (``Judged.learned``).
The reference points are rounds two-four's choices (the shipped adapter, temperature
0.1, the vote in the adapter's space, the vote beside the adapter); round five's are a
per-tool prototype (the mean of the tool's learned intents, scored against the query,
gated against the best description), an adapter trained against hard negatives (each
intent's softmax over its zero-shot top ``n`` and its tools only), the shipped adapter
scaled from the identity, anchored on the descriptions or with its cosines calibrated to
the raw query's, and a reciprocal-rank fusion of the shipped ranking with the prototype
ranking. ``cv`` scores them by cross-validation; ``recall`` adds ``CURVE`` to
its learning curve.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from research.search.adapter import Capacity, mapped_evidence, train_adapter, with_adapter
from research.search.fit import (
    Judged,
    Learned,
    average,
    hybrid_ranking,
    metrics,
    per_point,
)
from research.search.learned import NO_VOTE, revote
from research.search.vote_space import prepared
from shared.search.adapter import DECAY, EPOCHS, LEARNING_RATE, SEED, TAU
from shared.search.adapter import train_adapter as fit_adapter
from shared.search.fusion import LEXICAL, WEIGHTS
from shared.search.hybrid import Evidence
from shared.search.learned import FITTED
from shared.search.tool_vectors import Run

SHIPPED = "shipped (adapter, tau 0.05)"

Ranker = Callable[[Judged, Mapping[str, str]], list[str]]


def fused(evidence: Evidence, key: Mapping[str, str], *, vote_weight: float = 0.0) -> list[str]:
    return hybrid_ranking(evidence, weights={**WEIGHTS, "learned": vote_weight}, key=key)


def adapter_arm(capacity: Capacity, *, vote: Any = NO_VOTE) -> Ranker:
    """The adapter at ``capacity`` (the product at 50 % with ``Capacity()``), the vote beside."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        evidence = revote(with_adapter(j, adapter=capacity), vote=vote)
        return fused(evidence, key, vote_weight=vote.weight)

    return rank


def lexical_scale_arm(scale: float) -> Ranker:
    """The shipped adapter with the clause and word-coverage weights times ``scale`` (they
    were fitted against raw cosines; the adapted ones spread differently)."""
    shipped = Capacity()

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        weights = {f: w * scale if f in ("clause", *LEXICAL) else w for f, w in WEIGHTS.items()}
        evidence = with_adapter(j, adapter=shipped)
        return hybrid_ranking(evidence, weights={**weights, "learned": 0.0}, key=key)

    return rank


def vote_space_arm(*, gate: float | None, weight: float) -> Ranker:
    """Round four's vote in the adapter's space (``vote_space``, space "both")."""
    vote = replace(FITTED, gate=gate, weight=weight)

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        evidence, _ = prepared(j, space="both")
        return fused(revote(evidence, vote=vote), key, vote_weight=weight)

    return rank


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / (float(np.linalg.norm(v)) or 1.0), np.float32)


def prototypes(learned: Learned) -> dict[str, np.ndarray]:
    """Per tool, the normalised mean of the intents of its learned runs (cached per point)."""

    def make() -> dict[str, np.ndarray]:
        sums: dict[str, np.ndarray] = {}
        for run in learned.runs:
            vector = _unit(np.asarray(run.vector, np.float32))
            for tool in run.tools:
                sums[tool] = sums[tool] + vector if tool in sums else vector
        return {t: _unit(v) for t, v in sums.items()}

    return per_point(learned, "prototypes", make)


def _query(j: Judged, matrix: np.ndarray | None) -> np.ndarray:
    q = np.asarray(j.vector, np.float32)
    return _unit(matrix @ q) if matrix is not None else _unit(q)


def with_prototypes(
    j: Judged, evidence: Evidence, *, matrix: np.ndarray | None, gate: float
) -> Evidence:
    """``evidence`` with the ``toolvec`` feature set to each learned tool's prototype
    closeness above the gate: max(0, cos(query, prototype) - (best description cosine +
    ``gate``)); the query mapped by ``matrix`` when given."""
    assert j.learned is not None
    q = _query(j, matrix)
    best = max(evidence.dense.values(), default=0.0)
    features = {tool: dict(values) for tool, values in evidence.features.items()}
    for tool, proto in prototypes(j.learned).items():
        lift = float(proto @ q) - (best + gate)
        if lift > 0:
            features.setdefault(tool, {})["toolvec"] = lift
    return replace(evidence, features=features)


def prototype_arm(*, adapter: Capacity | None, gate: float, weight: float) -> Ranker:
    """The prototype vote (fused with ``weight``), beside the adapter when given."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or not j.learned.runs:
            return fused(j.evidence, key)
        matrix = train_adapter(j.learned, capacity=adapter) if adapter else None
        evidence = with_adapter(j, adapter=adapter) if adapter else j.evidence
        evidence = with_prototypes(j, evidence, matrix=matrix, gate=gate)
        weights = {**WEIGHTS, "learned": 0.0, "toolvec": weight}
        return hybrid_ranking(evidence, weights=weights, key=key)

    return rank


def hard_negative_adapter(learned: Learned, *, negatives: int) -> np.ndarray:
    """W trained as the shipped adapter (decay, steps, temperature, Adam) but each intent's
    softmax runs over its tools and its zero-shot ``negatives`` nearest descriptions only
    (the tools it could be confused with), not the whole catalogue."""
    return per_point(
        learned, ("hard negatives", negatives), lambda: _hard_negative_fit(learned, negatives)
    )


def _hard_negative_fit(learned: Learned, negatives: int) -> np.ndarray:
    import torch

    names = list(learned.descriptions)
    index = {t: i for i, t in enumerate(names)}
    pairs = [(r.vector, index[t]) for r in learned.runs for t in r.tools if t in index]
    catalogue = np.stack([np.asarray(learned.descriptions[t], np.float32) for t in names])
    x_np = np.stack([np.asarray(v, np.float32) for v, _ in pairs])
    allowed = np.zeros((len(pairs), len(names)), bool)
    nearest = np.argsort(-(x_np @ catalogue.T), axis=1)[:, :negatives]
    np.put_along_axis(allowed, nearest, True, axis=1)
    allowed[np.arange(len(pairs)), [i for _, i in pairs]] = True
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    x, d = torch.tensor(x_np), torch.tensor(catalogue)
    y = torch.tensor([i for _, i in pairs])
    mask = torch.where(torch.tensor(allowed), 0.0, float("-inf"))
    identity = torch.eye(catalogue.shape[1])
    w = identity.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([w], lr=LEARNING_RATE)
    for _ in range(EPOCHS):
        q = torch.nn.functional.normalize(x @ w.T, dim=1)
        loss = torch.nn.functional.cross_entropy(q @ d.T / TAU + mask, y)
        loss = loss + DECAY * ((w - identity) ** 2).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return np.asarray(w.detach().numpy(), np.float32)


def hard_negative_arm(*, negatives: int) -> Ranker:
    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or not j.learned.runs:
            return fused(j.evidence, key)
        matrix = hard_negative_adapter(j.learned, negatives=negatives)
        return fused(mapped_evidence(j, matrix=matrix), key)

    return rank


def scaled_adapter_arm(*, alpha: float) -> Ranker:
    """The shipped adapter moved ``alpha`` of the way from the identity: I + alpha (W - I)
    (below 1 a softer map, above 1 an extrapolation of what the runs taught)."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or not j.learned.runs:
            return fused(j.evidence, key)
        w = train_adapter(j.learned, capacity=Capacity())
        identity = np.eye(len(w), dtype=np.float32)
        return fused(mapped_evidence(j, matrix=identity + alpha * (w - identity)), key)

    return rank


def _anchored_fit(learned: Learned) -> np.ndarray:
    anchors = [
        Run(order=-1, vector=np.asarray(v, np.float32), tools=(t,))
        for t, v in learned.descriptions.items()
    ]
    return fit_adapter(learned.descriptions, [*learned.runs, *anchors])


def anchored_adapter_arm() -> Ranker:
    """The adapter trained on the runs plus every tool's description as a run of that tool:
    the catalogue's own wording anchors the map, so tools the tenant never ran keep theirs."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        learned = j.learned
        if learned is None or not learned.runs:
            return fused(j.evidence, key)
        matrix = per_point(learned, "anchored", lambda: _anchored_fit(learned))
        return fused(mapped_evidence(j, matrix=matrix), key)

    return rank


def calibrated_adapter_arm() -> Ranker:
    """The shipped adapter's cosines rescaled to the raw query's (same mean and spread over
    the candidates), so the lexical and clause weights, fitted against raw cosines, keep
    their say beside the adapted ones."""
    shipped = Capacity()

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or not j.learned.runs:
            return fused(j.evidence, key)
        evidence = with_adapter(j, adapter=shipped)
        raw = np.array(sorted(j.evidence.dense.values(), reverse=True))
        new = np.array(sorted(evidence.dense.values(), reverse=True))[: len(raw)]
        scale = float(raw.std() / new.std()) if new.std() > 0 else 1.0
        dense = {t: float(raw.mean() + (v - new.mean()) * scale) for t, v in evidence.dense.items()}
        return fused(replace(evidence, dense=dense), key)

    return rank


def rrf_arm(*, depth: int, share: float) -> Ranker:
    """Reciprocal ranks: 1/(depth + rank) of the shipped ranking plus ``share``/(depth + rank)
    of the prototype ranking (the tools with learned runs by cos(adapted query, prototype))."""
    shipped = adapter_arm(Capacity())

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        first = shipped(j, key)
        if j.learned is None or not j.learned.runs:
            return first
        q = _query(j, train_adapter(j.learned, capacity=Capacity()))
        protos = prototypes(j.learned)
        by_proto = sorted(protos, key=lambda t: -float(protos[t] @ q))
        score: dict[str, float] = {}
        for r, tool in enumerate(first):
            score[tool] = score.get(tool, 0.0) + 1.0 / (depth + r + 1)
        for r, tool in enumerate(by_proto[: len(first)]):
            gold_key = key.get(tool, tool)
            score[gold_key] = score.get(gold_key, 0.0) + share / (depth + r + 1)
        return sorted(score, key=lambda t: (-score[t], t))[: len(first)]

    return rank


def arms() -> dict[str, Ranker]:
    """Every arm the CV scores: rounds one-four's reference points, then round five's grid."""
    out: dict[str, Ranker] = {
        "dense": lambda j, key: list(j.dense),
        "zero-shot": lambda j, key: fused(j.evidence, key),
        "gated vote alone (the product before a consolidation)": lambda j, key: fused(
            revote(j.evidence, vote=FITTED), key, vote_weight=FITTED.weight
        ),
        SHIPPED: adapter_arm(Capacity()),
        "round three: adapter tau 0.1": adapter_arm(Capacity(tau=0.1)),
        "round four: vote in the adapter's space (gate -0.05, weight 1.5)": vote_space_arm(
            gate=-0.05, weight=1.5
        ),
        "round two: adapter + gated vote over every run": adapter_arm(Capacity(), vote=FITTED),
    }
    for adapted, gate, weight in itertools.product((False, True), (-0.1, 0.0), (0.3, 1.0, 3.0)):
        name = f"prototype{' + adapter' if adapted else ''}, gate {gate}, weight {weight}"
        out[name] = prototype_arm(adapter=Capacity() if adapted else None, gate=gate, weight=weight)
    for negatives in (10, 30):
        out[f"adapter, hard negatives (zero-shot top {negatives})"] = hard_negative_arm(
            negatives=negatives
        )
    for alpha in (0.5, 1.5, 2.0, 3.0):
        out[f"adapter scaled from the identity x{alpha}"] = scaled_adapter_arm(alpha=alpha)
    out["adapter anchored on the descriptions"] = anchored_adapter_arm()
    for scale in (0.5, 1.5):
        out[f"adapter, clause and word weights x{scale}"] = lexical_scale_arm(scale)
    out["adapter, cosines calibrated to the raw query's"] = calibrated_adapter_arm()
    for depth, share in itertools.product((10, 60), (0.5, 1.0)):
        out[f"rrf shipped + prototype, depth {depth}, share {share}"] = rrf_arm(
            depth=depth, share=share
        )
    return out


# The arms ``bench search`` adds to its learning curve (test halves, in memory): rounds three
# and four's choices (does the CV's order hold on the test halves?) and round five's arms
# the CV scored closest to the shipped setting (none beyond its noise: research/notes/search-history.md).
CURVE = (
    "round three: adapter tau 0.1",
    "round four: vote in the adapter's space (gate -0.05, weight 1.5)",
    "prototype + adapter, gate 0.0, weight 0.3",
    "adapter, clause and word weights x1.5",
    "adapter anchored on the descriptions",
    "adapter, hard negatives (zero-shot top 30)",
)


def curve_arms() -> dict[str, Ranker]:
    every = arms()
    return {name: every[name] for name in CURVE}


def ranked_metrics(
    judged: Sequence[Judged], *, rank: Ranker, key: Mapping[str, str], scoring: str
) -> dict[str, float]:
    """top-1 / @5 / @10 of ``rank`` averaged over ``judged``."""
    return average([metrics(rank(j, key), j.gold, scoring=scoring) for j in judged])
