"""The offline arms issue 31 names, and the product's fusion taken apart (round six; bench only).

The issue's study scored, with the same frozen MiniLM and the same protocol: a plain
nearest-past-intent vote fused with dense, Tool2Vec-style tool vectors (the description
embedding mixed with the mean of the tool's learned intents) and a linear adapter on the
query alone. Here each is a ``Ranker`` computed in memory from the query's embedding and
what the tenant had learned at the point (``Judged.learned``: every run, exact cosines over
all of them; no database, no gate, no lexical prior), so it is the signal itself:

- **plain vote + dense**: score = cos(query, description) + ``weight`` x the tool's share of
  its ``neighbours`` nearest runs' cosine (every neighbour counts, no floor).
- **Tool2Vec**: score = cos(query, unit(unit(description) + ``alpha`` x unit(mean intent)))
  for a learned tool, cos(query, description) for the others.
- **adapter, dense only**: the shipped adapter's map (``train_adapter`` at ``Capacity()``),
  then plain cosine to the descriptions.

And the product's parts, to find where the fusion loses what these keep: each of the three
signals put into the product's fusion (``fusion.fuse`` with its zero-shot features and
weights) in place of its own vote, with the lexical and clause priors on or off.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from research.search.adapter import Capacity, train_adapter, with_adapter
from research.search.arms import Ranker
from research.search.fit import KS, Judged, Learned, hybrid_ranking, per_point
from shared.search.fusion import LEXICAL, WEIGHTS
from shared.search.hybrid import Evidence

NEIGHBOURS = 10
PRIORS_OFF = {f: 0.0 for f in ("clause", *LEXICAL)}


class _Space:
    """A point's learned runs and catalogue as matrices (unit rows)."""

    def __init__(self, learned: Learned) -> None:
        self.ids = list(learned.descriptions)
        self.row = {t: i for i, t in enumerate(self.ids)}
        self.docs = _rows(np.stack([learned.descriptions[t] for t in self.ids]))
        runs = [r for r in learned.runs if any(t in self.row for t in r.tools)]
        self.intents = _rows(np.stack([r.vector for r in runs])) if runs else None
        self.tools = [[self.row[t] for t in r.tools if t in self.row] for r in runs]
        self.tool2vec: dict[float, np.ndarray] = {}  # alpha -> vectors (``tool2vec``)


def _rows(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, np.float32)
    return np.asarray(m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9), np.float32)


def space(learned: Learned) -> _Space:
    return per_point(learned, "space", lambda: _Space(learned))


def plain_votes(j: Judged, s: _Space, *, neighbours: int = NEIGHBOURS) -> np.ndarray:
    """Per catalogue row, its share of the query's ``neighbours`` nearest runs' cosine."""
    votes = np.zeros(len(s.ids), np.float32)
    if s.intents is None or j.vector is None:
        return votes
    q = _rows(np.asarray(j.vector)[None])[0]
    sims = s.intents @ q
    nearest = np.argsort(-sims)[:neighbours]
    total = float(np.clip(sims[nearest], 0.0, None).sum()) or 1.0
    for i in nearest:
        for row in s.tools[i]:
            votes[row] += max(0.0, float(sims[i])) / total
    return votes


def tool2vec(s: _Space, *, alpha: float) -> np.ndarray:
    """The catalogue's vectors with each learned tool's mean intent mixed in (cached on the
    space, one per point)."""
    if alpha not in s.tool2vec:
        vectors = s.docs.copy()
        if s.intents is not None:
            sums = np.zeros_like(vectors)
            for i, rows in enumerate(s.tools):
                for row in rows:
                    sums[row] += s.intents[i]
            learned = np.linalg.norm(sums, axis=1) > 0
            vectors[learned] = vectors[learned] + alpha * _rows(sums[learned])
        s.tool2vec[alpha] = _rows(vectors)
    return s.tool2vec[alpha]


def _ranked(scores: np.ndarray, s: _Space, key: Mapping[str, str]) -> list[str]:
    order = np.argsort(-scores, kind="stable")[: max(KS)]
    return [key.get(s.ids[i], s.ids[i]) for i in order]


def _query(j: Judged, matrix: np.ndarray | None = None) -> np.ndarray:
    q = np.asarray(j.vector, np.float32)
    return _rows((matrix @ q if matrix is not None else q)[None])[0]


def plain_vote_arm(*, weight: float, neighbours: int = NEIGHBOURS) -> Ranker:
    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or j.vector is None:
            return list(j.dense)
        s = space(j.learned)
        return _ranked(
            s.docs @ _query(j) + weight * plain_votes(j, s, neighbours=neighbours), s, key
        )

    return rank


def tool2vec_arm(*, alpha: float) -> Ranker:
    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or j.vector is None:
            return list(j.dense)
        s = space(j.learned)
        return _ranked(tool2vec(s, alpha=alpha) @ _query(j), s, key)

    return rank


def adapter_dense_arm() -> Ranker:
    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        if j.learned is None or j.vector is None:
            return list(j.dense)
        s = space(j.learned)
        matrix = train_adapter(j.learned, capacity=Capacity()) if j.learned.runs else None
        return _ranked(s.docs @ _query(j, matrix), s, key)

    return rank


def _with_learned(evidence: Evidence, values: Mapping[str, float], *, into: str) -> Evidence:
    """``evidence`` with feature ``into`` set to ``values`` (tools outside the candidate list
    join it at the list's lowest cosine, as the search scores a voted tool)."""
    lowest = min(evidence.dense.values(), default=0.0)
    dense = dict(evidence.dense)
    features = {
        t: {k: v for k, v in f.items() if k not in ("learned", "toolvec")}
        for t, f in evidence.features.items()
    }
    for tool, value in values.items():
        if value:
            dense.setdefault(tool, lowest)
            features.setdefault(tool, {})[into] = value
    return replace(evidence, dense=dense, features=features)


def fused_vote_arm(*, weight: float, priors: bool, adapter: bool = False) -> Ranker:
    """The plain vote as the fusion's ``learned`` feature at ``weight``, beside the product's
    zero-shot features (``priors`` False: lexical and clause off), over the adapted search
    when ``adapter``."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        evidence = with_adapter(j, adapter=Capacity()) if adapter else j.evidence
        if j.learned is not None and j.vector is not None:
            s = space(j.learned)
            votes = plain_votes(j, s)
            evidence = _with_learned(
                evidence, {s.ids[i]: float(v) for i, v in enumerate(votes) if v}, into="learned"
            )
        weights = {**WEIGHTS, **({} if priors else PRIORS_OFF), "learned": weight, "toolvec": 0.0}
        return hybrid_ranking(evidence, weights=weights, key=key)

    return rank


def fused_tool2vec_arm(*, alpha: float, priors: bool) -> Ranker:
    """Tool2Vec's cosine gain over the description's as the fusion's ``toolvec`` feature
    (weight 1: the tool vector's cosine replaces the description's), beside the zero-shot
    features (``priors`` False: lexical and clause off)."""

    def rank(j: Judged, key: Mapping[str, str]) -> list[str]:
        evidence = j.evidence
        if j.learned is not None and j.vector is not None and j.learned.runs:
            s = space(j.learned)
            q = _query(j)
            gain = tool2vec(s, alpha=alpha) @ q - s.docs @ q
            evidence = _with_learned(
                evidence, {s.ids[i]: float(g) for i, g in enumerate(gain) if g}, into="toolvec"
            )
        weights = {**WEIGHTS, **({} if priors else PRIORS_OFF), "learned": 0.0, "toolvec": 1.0}
        return hybrid_ranking(evidence, weights=weights, key=key)

    return rank


def issue_arms() -> dict[str, Ranker]:
    """The issue's arms (signal alone), then each in the product's fusion."""
    out: dict[str, Ranker] = {}
    for weight in (0.1, 0.3, 1.0):
        out[f"plain vote + dense, weight {weight}"] = plain_vote_arm(weight=weight)
    for alpha in (0.5, 1.0, 2.0):
        out[f"Tool2Vec, alpha {alpha}"] = tool2vec_arm(alpha=alpha)
    out["adapter, dense only"] = adapter_dense_arm()
    for weight, priors in itertools.product((0.1, 0.3, 1.0), (True, False)):
        tag = "priors on" if priors else "priors off"
        out[f"fusion: plain vote {weight}, {tag}"] = fused_vote_arm(weight=weight, priors=priors)
    for weight in (0.1, 0.3):
        out[f"fusion: adapter + plain vote {weight}"] = fused_vote_arm(
            weight=weight, priors=True, adapter=True
        )
    for alpha, priors in itertools.product((1.0,), (True, False)):
        tag = "priors on" if priors else "priors off"
        out[f"fusion: Tool2Vec alpha {alpha}, {tag}"] = fused_tool2vec_arm(
            alpha=alpha, priors=priors
        )
    return out
