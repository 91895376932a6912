"""The in-memory graph: Adamic-Adar and next steps as networkx computes them."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from shared.graph.metrics import adamic_adar, build_graph, out_neighbours, undirected_projection
from shared.search.graph_snapshot import GraphSnapshot, build_snapshot

KINDS = ("sequence", "co_used", "contains", "calls")


def snapshot_of_rows(*, version: str, rows: Sequence[tuple[str, str, str, float]]) -> GraphSnapshot:
    """A snapshot of edge rows (src, dst, kind, weight), filtered as the database load is."""
    edges = [r for r in rows if r[3] > 0 and r[0] != r[1]]
    ids = sorted({node for src, dst, _, _ in edges for node in (src, dst)})
    index = {node: i for i, node in enumerate(ids)}
    return build_snapshot(
        version=version,
        ids=ids,
        src=np.array([index[r[0]] for r in edges], dtype=np.int64),
        dst=np.array([index[r[1]] for r in edges], dtype=np.int64),
        co_used=np.array([r[2] == "co_used" for r in edges], dtype=bool),
        weight=np.array([r[3] for r in edges], dtype=np.float64),
    )


def _random_rows(seed: int) -> list[tuple[str, str, str, float]]:
    rnd = random.Random(seed)
    nodes = [f"s{i % 5}:t{i}" for i in range(60)] + ["cap:c1", "cap:c2"]
    return [
        (src, dst, rnd.choice(KINDS), rnd.choice([0.0, 0.5, 1.0, 2.0, 3.5]))
        for src in nodes
        for dst in rnd.sample(nodes, 5)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_adamic_adar_and_following_match_networkx(seed: int) -> None:
    rows = _random_rows(seed)
    snapshot = snapshot_of_rows(version="v", rows=rows)
    graph = build_graph(rows)
    context = ["s1:t1", "s2:t7"]
    candidates = [f"s{i % 5}:t{i}" for i in range(0, 60, 2)] + ["cap:c1", "nowhere:x"]
    expected = {
        t: s
        for t, s in adamic_adar(
            undirected_projection(graph), context=context, candidates=candidates
        ).items()
        if s > 0 and t not in context
    }
    assert expected
    assert snapshot.adamic_adar(context, candidates) == pytest.approx(expected)
    for node in context:
        ours = snapshot.following(node, limit=10)
        theirs = out_neighbours(graph, node=node, limit=10)
        assert [name for name, _ in ours] == [name for name, _ in theirs]
        assert [weight for _, weight in ours] == pytest.approx([weight for _, weight in theirs])


def test_self_loops_zero_weights_and_unknown_nodes_are_not_graph_edges() -> None:
    snapshot = snapshot_of_rows(
        version="v",
        rows=[
            ("a:x", "a:x", "sequence", 5.0),
            ("a:x", "b:y", "sequence", 0.0),
            ("a:x", "c:z", "co_used", 2.0),
            ("d:w", "a:x", "co_used", 1.0),
        ],
    )
    assert snapshot.following("a:x", limit=5) == [("c:z", 2.0), ("d:w", 1.0)]  # co_used both ways
    assert snapshot.following("b:y", limit=5) == []
    assert snapshot.following("unknown:tool", limit=5) == []
    assert snapshot.adamic_adar(["c:z"], ["d:w", "unknown:tool"]) == {
        "d:w": pytest.approx(1 / 0.6931471805599453)
    }
