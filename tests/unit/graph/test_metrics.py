"""Graph metrics: weighted PageRank, stable Louvain communities, Adamic-Adar, next-tool ranking."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from shared.graph.metrics import (
    adamic_adar,
    build_graph,
    compute_metrics,
    directed_weights,
    out_neighbours,
    undirected_projection,
    weighted_pagerank,
)

# Two clusters (fs/text tools and mail/calendar tools) joined by one weak edge.
ROWS: list[tuple[str, str, str, float]] = [
    ("fs:read", "text:split", "sequence", 3.0),
    ("text:split", "fs:write", "sequence", 3.0),
    ("fs:read", "fs:write", "co_used", 2.0),
    ("fs:list", "fs:read", "sequence", 2.0),
    ("mail:search", "mail:read", "sequence", 3.0),
    ("mail:read", "cal:create", "sequence", 3.0),
    ("cal:create", "mail:search", "co_used", 2.0),
    ("cal:list", "cal:create", "sequence", 2.0),
    ("fs:write", "mail:search", "sequence", 0.1),
]


def test_co_used_counts_both_ways_and_kinds_add_up() -> None:
    graph = build_graph([("a:x", "b:y", "co_used", 0.5), ("a:x", "b:y", "sequence", 1.0)])
    assert graph["a:x"]["b:y"]["weight"] == 1.5
    assert graph["b:y"]["a:x"]["weight"] == 0.5


def test_rows_may_be_mappings_as_read_from_postgres() -> None:
    graph = build_graph([{"src": "a:x", "dst": "b:y", "kind": "sequence", "weight": 2.0}])
    assert graph["a:x"]["b:y"]["weight"] == 2.0


def test_pagerank_favours_the_tool_everything_flows_into() -> None:
    rows = [(f"t:{i}", "t:hub", "sequence", 1.0) for i in range(5)] + [
        ("t:0", "t:1", "sequence", 1.0)
    ]
    ranks = compute_metrics(rows=rows).pagerank
    assert max(ranks, key=ranks.__getitem__) == "t:hub"
    assert abs(sum(ranks.values()) - 1.0) < 1e-6


def test_pagerank_uses_weights() -> None:
    ranks = compute_metrics(
        rows=[("t:a", "t:b", "sequence", 9.0), ("t:a", "t:c", "sequence", 1.0)]
    ).pagerank
    assert ranks["t:b"] > ranks["t:c"]


def test_louvain_separates_the_two_clusters_and_is_stable() -> None:
    metrics = compute_metrics(rows=ROWS)
    fs_side = {metrics.community[n] for n in ("fs:read", "fs:write", "text:split", "fs:list")}
    mail_side = {
        metrics.community[n] for n in ("mail:search", "mail:read", "cal:create", "cal:list")
    }
    assert len(fs_side) == 1 and len(mail_side) == 1 and fs_side != mail_side
    # Same graph, rows in another order → identical ids (seeded, numbered deterministically).
    assert compute_metrics(rows=list(reversed(ROWS))).community == metrics.community
    assert (metrics.nodes, metrics.edges) == (8, 11)


def test_empty_graph_gives_empty_metrics() -> None:
    metrics = compute_metrics(rows=[])
    assert metrics.pagerank == {} and metrics.community == {}


def test_adamic_adar_prefers_candidates_sharing_rare_neighbours() -> None:
    undirected = undirected_projection(build_graph(ROWS))
    scores = adamic_adar(
        undirected,
        context=["fs:read"],
        candidates=["fs:write", "mail:read", "cal:create", "nope:x"],
    )
    assert scores["fs:write"] > 0  # shares text:split (and fs:read's other neighbours)
    assert scores["mail:read"] == 0.0
    assert scores["nope:x"] == 0.0


def test_out_neighbours_are_ranked_by_weight() -> None:
    graph = build_graph(
        [
            ("fs:read", "a:x", "sequence", 1.0),
            ("fs:read", "b:y", "sequence", 5.0),
            ("fs:read", "c:z", "co_used", 2.0),
        ]
    )
    assert out_neighbours(graph, node="fs:read", limit=2) == [("b:y", 5.0), ("c:z", 2.0)]
    assert out_neighbours(graph, node="missing:tool") == []


def test_communities_on_graph_with_isolated_pair() -> None:
    metrics = compute_metrics(rows=[("a:x", "b:y", "sequence", 1.0)])
    assert metrics.community == {"a:x": 0, "b:y": 0}


def test_weighted_pagerank_is_networkx_pagerank() -> None:
    """The refresh's sparse PageRank equals nx.pagerank on the same graph (dangling nodes too)."""
    rng = random.Random(7)
    kinds = ["sequence", "co_used", "contains", "calls"]
    rows = [
        (f"s:t{rng.randrange(60)}", f"s:t{rng.randrange(80)}", rng.choice(kinds), rng.random())
        for _ in range(400)
    ]
    weights = directed_weights(rows)
    nodes = sorted({n for pair in weights for n in pair})
    ours = weighted_pagerank(nodes=nodes, weights=weights)
    theirs = nx.pagerank(build_graph(rows), alpha=0.85, weight="weight")
    assert ours.keys() == theirs.keys()
    assert max(abs(ours[n] - theirs[n]) for n in nodes) < 1e-6
    assert sum(ours.values()) == pytest.approx(1.0)
