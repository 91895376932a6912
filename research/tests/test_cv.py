"""The bench's k-fold cross-validation and round five's arms (issue 31): pure, small data."""

from __future__ import annotations

from collections import Counter

import numpy as np

from deploy.bench.datasets import Query
from research.search.arms import SHIPPED, prototypes
from research.search.cv import Fold, K, cv_folds, summarise
from research.search.fit import Judged, Learned
from shared.search.tool_vectors import Run
from tests.unit.search.test_adapter import _catalogue, _unit


def _requests() -> list[Query]:
    # Tools asked 1 to 6 times, as the learning halves hold them.
    return [
        Query(text=f"ask {tool} #{n}", gold=frozenset({f"t:{tool}"}), split="tune")
        for tool in range(6)
        for n in range(tool + 1)
    ]


def test_every_learning_request_is_validation_exactly_once_in_each_deal() -> None:
    requests = _requests()
    for seed in range(3):
        folds = cv_folds(requests, seed=seed)
        assert len(folds) == K
        dealt = Counter(q.text for fold in folds for q in fold)
        assert dealt == Counter(q.text for q in requests)


def test_folds_are_stratified_by_tool() -> None:
    # A tool's requests go round the folds: no fold holds two of a tool before every fold
    # holds one, so each fold's fit part keeps the tool's other requests.
    folds = cv_folds(_requests(), seed=1)
    for tool in range(6):
        counts = [sum(f"t:{tool}" in q.gold for q in fold) for fold in folds]
        assert max(counts) - min(counts) <= 1, (tool, counts)


def test_the_deal_changes_with_the_seed() -> None:
    requests = _requests()
    assert cv_folds(requests, seed=0) != cv_folds(requests, seed=1)


def test_a_prototype_is_the_mean_of_its_tools_intents() -> None:
    rng = np.random.default_rng(0)
    descriptions = _catalogue(rng)
    a, b, c = _unit(rng.normal(size=(3, 16)))
    runs = [
        Run(order=0, vector=a, tools=("t:0",)),
        Run(order=1, vector=b, tools=("t:0", "t:1")),
        Run(order=2, vector=c, tools=("t:1",)),
    ]
    protos = prototypes(Learned(descriptions=descriptions, runs=runs))
    assert set(protos) == {"t:0", "t:1"}
    assert np.allclose(protos["t:0"], _unit(a + b))
    assert np.allclose(protos["t:1"], _unit(b + c))


def test_an_arm_is_scored_against_the_shipped_one_request_by_request() -> None:
    # Two deals of the same two requests: an arm that finds one request the shipped setting
    # misses gains on it in both deals; the same arm as the shipped one gains nothing.
    rng = np.random.default_rng(2)
    requests = [
        Judged(evidence=None, gold=frozenset({g}), dense=[], vector=_unit(rng.normal(size=16)))  # type: ignore[arg-type]
        for g in ("a", "b")
    ]
    folds = [Fold(repeat=r, fold=0, judged=requests) for r in range(2)]
    hit = {"top1": 1.0, "@5": 1.0, "@10": 1.0}
    miss = {"top1": 0.0, "@5": 0.0, "@10": 0.0}
    scores = {
        SHIPPED: {"s": [[hit, miss], [hit, miss]]},
        "same": {"s": [[hit, miss], [hit, miss]]},
        "better": {"s": [[hit, hit], [hit, hit]]},
    }
    rows = {r["arm"]: r for r in summarise(scores, folds={"s": folds})}
    assert rows["same"]["vs_shipped"] == 0.0 and rows["same"]["vs_shipped_se"] == 0.0
    assert rows["better"]["vs_shipped"] == 1.5  # (3 - 0) on one request of two
    assert rows["better"]["objective"] == 3.0 and rows[SHIPPED]["objective"] == 1.5
    assert rows["better"]["sets"]["s"]["top1"] == 1.0
