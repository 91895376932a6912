"""Smoke test of ``research.search.recall.run`` on small subsets: JSON shape only."""

from __future__ import annotations

import pytest

from research.search import recall
from research.search.arms import CURVE
from shared.search.fusion import FEATURES


@pytest.mark.usefixtures("bench_server")
def test_research_recall_shape() -> None:
    out = recall.run(
        max_tasks=3,
        latency_tools=300,
        latency_edges=2000,
        latency_intents=200,
        latency_queries=3,
    )
    assert set(out["sets"]) == {
        "livemcpbench",
        "real_servers",
        "more_servers",
        "real_servers_issue11",
        "real_servers_issue31",
        "bfcl_single",
        "bfcl_multi",
    }
    assert out["sets"]["livemcpbench"]["tools"] == 527
    assert set(out["weights_in_use"]) == set(out["weights_fitted"]) == set(FEATURES)
    # Each learned weight tried is reported, with None where a set fell below dense.
    assert str(out["weights_in_use"]["learned"]) in out["learned_weight_objective"]
    for result in out["sets"].values():
        assert result["queries"] == 3
        splits = result["zero_shot"]
        assert set(splits) == {"tune", "holdout"}
        assert sum(s["queries"] for s in splits.values()) == 3
        for split in splits.values():
            for key in ("dense", "hybrid"):
                assert set(split[key]) == {"top1", "@5", "@10"}
                assert all(0.0 <= v <= 1.0 for v in split[key].values())
        curve = result["learned"]["curve"]
        assert [p["fraction"] for p in curve] == [0.0, 0.1, 0.25, 0.5]
        # Each point: dense, zero-shot, the old votes and the fitted one, the tool vectors,
        # the adapter alone and beside the vote (in memory, on the same searches) and the
        # product as searched after the point's consolidation.
        arms = ("dense", "zero_shot", "legacy", "ungated", "learned", "tool_vectors")
        for point in curve:
            for arm in (*arms, "adapter", "adapter_and_vote", "product", *CURVE):
                assert set(point[arm]) == {"top1", "@5", "@10"}
    latency = out["latency"]
    assert latency["tools"] == 300 and latency["edges"] == 2000
    assert latency["stored_intents"] == 200
    # Short requests are timed with the fitted vote and, in the same run, with the old one
    # and after a consolidation (its adapter applied), without and with the tool-vector read.
    assert {
        "livemcpbench_questions",
        "short_requests",
        "short_requests_legacy_vote",
        "short_requests_after_consolidation",
        "short_requests_with_tool_vectors_read",
    } <= set(latency["query_sets"])
    consolidation = latency["consolidation"]
    assert consolidation["trained_on"] + consolidation["held_back"] <= 200
    assert consolidation["version"] == 1 and consolidation["tools"] > 0
    assert consolidation["adapter"]["version"] == 1
    for timed in latency["query_sets"].values():
        assert timed["total_ms"]["p95"] >= timed["total_ms"]["p50"] > 0
        assert timed["tokens_embedded"]["p50"] > 0
