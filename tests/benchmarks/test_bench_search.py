"""Smoke test of `agentcards bench search` and `bench match` on small subsets: JSON shape only."""

from __future__ import annotations

import pytest

from deploy.bench import match, search
from deploy.launcher.embedded import EmbeddedPostgres


@pytest.fixture
def bench_server(embedded_pg: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch) -> None:
    # The benches create (and drop) their own database on this server.
    monkeypatch.setenv("AGENTCARDS_DATABASE_URL", embedded_pg.url)


@pytest.mark.usefixtures("bench_server")
def test_bench_search_shape() -> None:
    out = search.run(max_tasks=3, latency_tools=300, latency_edges=2000, latency_queries=3)
    recall = out["recall"]
    assert recall["tasks"] == 3 and recall["tools"] == 527
    for key in ("baseline_dense", "hybrid", "delta"):
        assert set(recall[key]) == {"recall@5", "recall@10", "recall@20"}
        assert all(-1.0 <= v <= 1.0 for v in recall[key].values())
    assert all(0.0 <= v <= 1.0 for v in recall["hybrid"].values())
    latency = out["latency"]
    assert latency["tools"] == 300 and latency["edges"] == 2000
    assert set(latency["query_sets"]) == {"livemcpbench_questions", "short_requests"}
    for timed in latency["query_sets"].values():
        assert timed["total_ms"]["p95"] >= timed["total_ms"]["p50"] > 0
        assert timed["tokens_embedded"]["p50"] > 0


def test_match_set_is_big_enough() -> None:
    data = match.load_set()
    assert len(data["capabilities"]) >= 60 and len(data["unrelated"]) >= 60
    assert all(len(c["paraphrases"]) >= 3 and c["code"] for c in data["capabilities"])
