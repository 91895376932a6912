"""Consolidated tool vectors: the mix, the hold-out split and its score."""

from __future__ import annotations

import numpy as np
import pytest

from shared.search.fusion import WEIGHTS, fuse
from shared.search.tool_vectors import (
    FITTED_MIX,
    Run,
    gains,
    held_back_top1,
    hold_out,
    mix_weight,
    tool_vectors,
)


def unit(*values: float) -> np.ndarray:
    v = np.asarray(values, np.float32)
    return v / np.linalg.norm(v)


DESCRIPTIONS = {"a": unit(1, 0, 0), "b": unit(0, 1, 0), "c": unit(0, 0, 1)}


def test_the_description_share_shrinks_with_the_intents_learned() -> None:
    assert mix_weight(0, k=4.0) == 1.0
    assert mix_weight(4, k=4.0) == 0.5
    assert mix_weight(12, k=4.0) == 0.25


def test_a_vector_mixes_description_and_mean_intent_and_is_normalised() -> None:
    runs = [Run(order=1, vector=unit(0, 1, 0), tools=("a",))]
    ((vector, n),) = tool_vectors(DESCRIPTIONS, runs, k=1.0).values()
    assert n == 1
    np.testing.assert_allclose(vector, unit(1, 1, 0), atol=1e-6)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0)


def test_only_tools_with_runs_and_a_description_get_a_vector() -> None:
    runs = [
        Run(order=1, vector=unit(0, 1, 0), tools=("a", "gone")),
        Run(order=2, vector=unit(0, 1, 1), tools=("a",)),
    ]
    fitted = tool_vectors(DESCRIPTIONS, runs, k=2.0)
    assert set(fitted) == {"a"}  # "gone" has no description: removed, no vector
    assert fitted["a"][1] == 2


def test_gain_is_zero_for_tools_without_vector_so_fusion_is_zero_shot() -> None:
    query = unit(1, 1, 0)
    got = gains(query, descriptions=DESCRIPTIONS, vectors={"a": unit(1, 1, 0)})
    assert set(got) == {"a"}
    assert got["a"] == pytest.approx(1.0 - float(DESCRIPTIONS["a"] @ query))
    dense = {t: float(v @ query) for t, v in DESCRIPTIONS.items()}
    # The search does not read tool vectors (weight 0 in WEIGHTS); the bench's arm
    # weighs them as fitted.
    weights = {**WEIGHTS, "toolvec": FITTED_MIX.weight}
    zero = fuse(dense=dense, features={}, weights=weights)
    with_vectors = fuse(dense=dense, features={"a": {"toolvec": got["a"]}}, weights=weights)
    assert with_vectors["b"] == zero["b"] and with_vectors["c"] == zero["c"]
    assert with_vectors["a"] > zero["a"]


def test_each_tools_most_recent_run_is_held_back_when_it_has_two() -> None:
    runs = [
        Run(order=1, vector=unit(1, 0, 0), tools=("a",)),
        Run(order=2, vector=unit(1, 0, 0), tools=("b",)),
        Run(order=3, vector=unit(1, 0, 0), tools=("a",)),
        Run(order=4, vector=unit(1, 0, 0), tools=("c",)),
        Run(order=5, vector=unit(1, 0, 0), tools=("c", "b")),
    ]
    train, held = hold_out(runs)
    assert [r.order for r in held] == [3, 5]
    assert [r.order for r in train] == [1, 2, 4]


def test_held_back_top1_counts_runs_whose_best_tool_they_used() -> None:
    held = [
        Run(order=1, vector=unit(1, 0.5, 0), tools=("b",)),
        Run(order=2, vector=unit(0, 0, 1), tools=("c",)),
    ]
    assert held_back_top1(held, descriptions=DESCRIPTIONS, vectors={}, weight=1.0) == 0.5
    learned = {"b": unit(1, 1, 0)}  # b's vector moved toward how b was asked for
    assert held_back_top1(held, descriptions=DESCRIPTIONS, vectors=learned, weight=1.0) == 1.0
    assert held_back_top1([], descriptions=DESCRIPTIONS, vectors=learned, weight=1.0) == 0.0
