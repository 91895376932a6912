"""Score fusion and learned votes: pure logic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared.search.fusion import FEATURES, contributions, explain, fuse, support
from shared.search.learned import (
    FITTED,
    HALF_LIFE_DAYS,
    LEGACY,
    Vote,
    intent_weight,
    tool_votes,
)

ZERO = {f: 0.0 for f in FEATURES}


def test_zero_weights_are_the_dense_ranking() -> None:
    dense = {"a": 0.9, "b": 0.8}
    fused = fuse(dense=dense, features={"b": {"name": 1.0}}, weights=ZERO)
    assert fused == {"a": 0.9, "b": 0.8}


def test_evidence_moves_a_close_second_but_not_a_distant_one() -> None:
    weights = {**ZERO, "name": 0.05}
    close = fuse(dense={"a": 0.80, "b": 0.78}, features={"b": {"name": 1.0}}, weights=weights)
    far = fuse(dense={"a": 0.80, "b": 0.60}, features={"b": {"name": 1.0}}, weights=weights)
    assert max(close, key=close.__getitem__) == "b"
    assert max(far, key=far.__getitem__) == "a"


def test_candidate_outside_dense_list_starts_at_its_floor() -> None:
    fused = fuse(
        dense={"a": 0.7, "b": 0.5}, features={"c": {"learned": 1.0}}, weights={"learned": 0.3}
    )
    assert fused["c"] == pytest.approx(0.8)


def test_votes_weigh_similarity_and_count_failures_against() -> None:
    rows = [
        {"sim": 1.0, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": []},
        {"sim": 0.75, "age_days": 0.0, "tools_ok": ["t:b"], "tools_failed": ["t:c"]},
        {"sim": FITTED.floor, "age_days": 0.0, "tools_ok": ["t:z"], "tools_failed": []},
    ]
    votes = tool_votes(rows)
    assert votes["t:a"] > votes["t:b"] > 0 > votes["t:c"]
    assert "t:z" not in votes  # too far to say anything


def test_closer_intents_weigh_more_and_older_ones_less() -> None:
    assert intent_weight(similarity=1.0, age_days=0.0) == pytest.approx(1.0)
    assert (
        intent_weight(similarity=0.9, age_days=0.0)
        > intent_weight(similarity=0.6, age_days=0.0)
        > intent_weight(similarity=FITTED.floor + 0.01, age_days=0.0)
        > 0
    )
    assert intent_weight(similarity=1.0, age_days=HALF_LIFE_DAYS) == pytest.approx(0.5)


def test_the_vote_grows_with_evidence_and_disagreement_splits_it() -> None:
    run = {"sim": 0.8, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": []}
    one = tool_votes([run])
    three = tool_votes([run] * 3)
    split = tool_votes([run, {**run, "tools_ok": ["t:b"]}])
    # Shrunk toward zero-shot by FITTED.prior: more agreeing evidence, a larger say (< 1).
    assert 0 < one["t:a"] < three["t:a"] < 1
    assert split["t:a"] == split["t:b"] < one["t:a"]


def test_legacy_vote_saturates_at_one_intent_of_weight() -> None:
    # The hand-set vote the bench ablates against: sum / max(1, sum of weights).
    far = {"sim": 0.6, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": []}
    assert tool_votes([far], vote=LEGACY)["t:a"] == pytest.approx(0.04)
    assert tool_votes([{**far, "sim": 1.0}] * 3, vote=LEGACY)["t:a"] == pytest.approx(1.0)


def test_nothing_close_means_no_vote() -> None:
    rows = [
        {"sim": FITTED.floor - 0.05, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": ["t:b"]}
    ]
    assert tool_votes(rows) == {}


def test_older_runs_count_less() -> None:
    now = intent_weight(similarity=0.9, age_days=0.0)
    assert intent_weight(similarity=0.9, age_days=HALF_LIFE_DAYS) == pytest.approx(now / 2)


def test_explain_names_learned_evidence() -> None:
    why = explain(
        parts={"semantic": 0.5, "learned": 0.4, "name": 0.08},
        matched_words={"name": ["file"]},
        learned=0.4,
    )
    assert why.startswith("used for similar requests before (vote 0.40) (+0.400)")
    assert "query words in its name: file (+0.080)" in why


def test_a_prior_does_not_lift_a_tool_the_request_does_not_speak_for() -> None:
    # A tool at cosine 0.05 with the best graph and PageRank must not rank above the tools
    # the request is about (0.2): a prior is scaled by support, 0 that far down.
    weights = {**ZERO, "graph": 0.1, "pagerank": 0.02}
    dense = {"memory:add": 0.21, "memory:create": 0.2, "git:status": 0.05}
    features = {"git:status": {"graph": 1.0, "pagerank": 1.0}}
    fused = fuse(dense=dense, features=features, weights=weights)
    assert fused["git:status"] == pytest.approx(0.05)
    assert max(fused, key=fused.__getitem__) == "memory:add"


def test_a_prior_reorders_close_supported_hits() -> None:
    weights = {**ZERO, "graph": 0.1}
    dense = {"a": 0.50, "b": 0.49, "far": 0.20}
    features = {"b": {"graph": 1.0}, "far": {"graph": 1.0}}
    fused = fuse(dense=dense, features=features, weights=weights)
    assert fused["b"] > fused["a"] > fused["far"] == pytest.approx(0.20)


def test_lexical_coverage_is_support_too() -> None:
    backing = support(dense={"a": 0.5, "b": 0.1}, features={"b": {"name": 0.7, "graph": 1.0}})
    assert backing["a"] == 1.0 and backing["b"] == pytest.approx(0.7)


def test_contributions_sum_to_the_fused_score() -> None:
    dense = {"a": 0.5, "b": 0.45}
    features = {"a": {"name": 0.5, "pagerank": 0.3}, "b": {"graph": 1.0, "learned": -0.5}}
    parts = contributions(dense=dense, features=features)
    fused = fuse(dense=dense, features=features)
    assert {t: sum(p.values()) for t, p in parts.items()} == pytest.approx(fused)
    assert set(parts["b"]) == {"semantic", "graph", "learned"}


def test_the_gate_silences_runs_no_closer_than_the_best_description() -> None:
    # A past request much farther from the query than the best tool's
    # description (here 0.45 against 0.80, gate -0.1) says nothing, so a tool the tenant
    # never ran is not pushed down by other tools' runs; a paraphrase (0.9) still votes.
    gated = Vote(floor=0.0, power=2.0, prior=1.0, weight=0.3, gate=-0.1)
    weak = {"sim": 0.45, "age_days": 0.0, "tools_ok": ["t:other"], "tools_failed": []}
    strong = {**weak, "sim": 0.9, "tools_ok": ["t:ran"]}
    assert tool_votes([weak], vote=gated, best_dense=0.80) == {}
    assert tool_votes([weak], vote=replace(gated, gate=None), best_dense=0.80)["t:other"] > 0
    assert tool_votes([weak, strong], vote=gated, best_dense=0.80).keys() == {"t:ran"}
    # Without a dense list to compare with, the plain floor applies.
    assert tool_votes([weak], vote=gated, best_dense=None)["t:other"] > 0


def test_a_lone_weak_run_moves_less_than_a_repeated_close_one() -> None:
    # The larger prior (one intent's worth): one barely-close run is a small share.
    lone = tool_votes([{"sim": 0.75, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": []}])
    repeat = tool_votes([{"sim": 1.0, "age_days": 0.0, "tools_ok": ["t:a"], "tools_failed": []}])
    assert FITTED.prior >= 1.0
    assert lone["t:a"] < 0.4 < repeat["t:a"]
