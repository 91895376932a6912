"""Graph metrics over ``tool_edges``: weighted PageRank, Louvain communities, Adamic-Adar.

networkx is the graph model (suggestions, Adamic-Adar, next tools); the whole-graph
refresh computes from the summed edge weights directly (sparse PageRank, igraph Louvain).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from shared.graph.weights import EdgeKind

# Louvain is randomised; one fixed seed keeps communities identical between refreshes
# of an unchanged graph, so the dashboard and suggestions do not flicker.
LOUVAIN_SEED = 42
PAGERANK_ALPHA = 0.85  # the usual damping factor

EdgeRow = tuple[str, str, str, float]  # (src, dst, kind, weight), as stored in tool_edges


@dataclass(frozen=True)
class GraphMetrics:
    """Per-node PageRank (sums to 1) and community id (0 = largest community)."""

    pagerank: dict[str, float] = field(default_factory=dict)
    community: dict[str, int] = field(default_factory=dict)
    nodes: int = 0
    edges: int = 0


def build_graph(rows: Iterable[EdgeRow | Mapping[str, Any]]) -> nx.DiGraph:
    """A DiGraph with one edge per (src, dst), weight summed over kinds.

    ``co_used`` rows are stored once per unordered pair, so they add their weight in
    both directions. Rows are tuples or mappings with src, dst, kind, weight keys.
    """
    return _digraph(directed_weights(rows))


def directed_weights(rows: Iterable[EdgeRow | Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """Weight per (src, dst) as ``build_graph`` sums it: kinds added, co_used both ways,
    self loops and non-positive weights dropped."""
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for row in rows:
        if isinstance(row, Mapping):
            src, dst, kind, weight = row["src"], row["dst"], row["kind"], row["weight"]
        else:
            src, dst, kind, weight = row
        if src == dst or weight <= 0:
            continue
        weights[(src, dst)] += float(weight)
        if kind == EdgeKind.CO_USED:
            weights[(dst, src)] += float(weight)
    return weights


def _digraph(weights: Mapping[tuple[str, str], float]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_weighted_edges_from((src, dst, w) for (src, dst), w in weights.items())
    return graph


def undirected_projection(graph: nx.DiGraph) -> nx.Graph:
    """The undirected graph with a→b and b→a weights added together."""
    undirected = nx.Graph()
    undirected.add_nodes_from(graph.nodes)
    undirected.add_weighted_edges_from(
        (a, b, w)
        for (a, b), w in _undirected_weights(graph.edges(data="weight", default=1.0)).items()
    )
    return undirected


def _undirected_weights(
    edges: Iterable[tuple[str, str, float]],
) -> dict[tuple[str, str], float]:
    """Weight per unordered pair (a < b): a→b and b→a added together."""
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for src, dst, weight in edges:
        key = (src, dst) if src <= dst else (dst, src)
        weights[key] += weight
    return weights


def _louvain(
    *, nodes: Iterable[str], weights: Mapping[tuple[str, str], float], seed: int
) -> dict[str, int]:
    """Louvain community per node, numbered by size (largest first, ties by smallest node id).

    igraph's C ``community_multilevel``: networkx's pure Python Louvain alone took
    2.2-7 s at 10k nodes / 100k edges, igraph 0.1-0.6 s for the same modularity.
    """
    import random

    import igraph

    ordered_nodes = sorted(nodes)
    if not ordered_nodes:
        return {}
    index = {node: i for i, node in enumerate(ordered_nodes)}
    # Edges in a canonical order: the same graph gives the same partition, whatever
    # order its rows came back from the database in.
    pairs = sorted(weights)
    graph = igraph.Graph(n=len(ordered_nodes), edges=[(index[a], index[b]) for a, b in pairs])
    # igraph draws from Python's `random` by default: a private seeded generator makes
    # the partition identical for an identical graph without touching global state.
    igraph.set_random_number_generator(random.Random(seed))
    try:
        clustering = graph.community_multilevel(weights=[weights[p] for p in pairs] or None)
    finally:
        igraph.set_random_number_generator(random)
    found = [{ordered_nodes[i] for i in members} for members in clustering]
    ordered = sorted(found, key=lambda members: (-len(members), min(members)))
    return {node: number for number, members in enumerate(ordered) for node in members}


def compute_metrics(*, rows: Iterable[EdgeRow | Mapping[str, Any]]) -> GraphMetrics:
    """PageRank and communities for the whole graph: what refresh_graph_metrics stores.

    Both are computed from the summed edge weights directly (``weighted_pagerank``,
    igraph's Louvain): building networkx graphs of 10k nodes / 100k edges and
    converting them to matrices took ~2 s of the 2 s budget.
    """
    weights = directed_weights(rows)
    nodes = sorted({n for pair in weights for n in pair})
    return GraphMetrics(
        pagerank=weighted_pagerank(nodes=nodes, weights=weights),
        community=_louvain(
            nodes=nodes,
            weights=_undirected_weights((a, b, w) for (a, b), w in weights.items()),
            seed=LOUVAIN_SEED,
        ),
        nodes=len(nodes),
        edges=len(weights),
    )


def weighted_pagerank(
    *,
    nodes: Sequence[str],
    weights: Mapping[tuple[str, str], float],
    alpha: float = PAGERANK_ALPHA,
    max_iter: int = 100,
    tol: float = 1.0e-6,
) -> dict[str, float]:
    """``nx.pagerank(build_graph(...), weight="weight")`` computed on a sparse matrix.

    The same power iteration as networkx's scipy implementation (uniform teleport,
    dangling nodes spread uniformly, stop when the L1 change < n * tol), minus the
    per-edge Python work of building a DiGraph and converting it.
    """
    import numpy as np
    from scipy import sparse

    n = len(nodes)
    if n == 0:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    rows = np.fromiter((index[a] for a, _ in weights), dtype=np.int64, count=len(weights))
    cols = np.fromiter((index[b] for _, b in weights), dtype=np.int64, count=len(weights))
    values = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    matrix = sparse.csr_array((values, (rows, cols)), shape=(n, n))
    out_weight = np.asarray(matrix.sum(axis=1)).ravel()
    dangling = out_weight == 0
    inverse = np.zeros(n)
    inverse[~dangling] = 1.0 / out_weight[~dangling]
    transition = sparse.diags_array(inverse) @ matrix
    uniform = np.full(n, 1.0 / n)
    x = uniform.copy()
    for _ in range(max_iter):
        previous = x
        x = alpha * (x @ transition + x[dangling].sum() * uniform) + (1 - alpha) * uniform
        if np.abs(x - previous).sum() < n * tol:
            return dict(zip(nodes, x.tolist(), strict=True))
    raise nx.PowerIterationFailedConvergence(max_iter)


def adamic_adar(
    undirected: nx.Graph, *, context: Iterable[str], candidates: Iterable[str]
) -> dict[str, float]:
    """Each candidate's Adamic-Adar score summed over the context nodes (unweighted, undirected).

    Shared neighbours count 1/ln(degree), so a hub everyone touches says little.
    Candidates or context nodes absent from the graph score 0; a candidate is never
    scored against itself.
    """
    present = [node for node in dict.fromkeys(context) if node in undirected]
    scores: dict[str, float] = {}
    for candidate in dict.fromkeys(candidates):
        score = 0.0
        if candidate in undirected:
            neighbours = set(undirected[candidate])
            for node in present:
                if node == candidate:
                    continue
                for common in neighbours.intersection(undirected[node]):
                    # A common neighbour has degree ≥ 2, so the log is > 0.
                    score += 1.0 / math.log(undirected.degree(common))
        scores[candidate] = score
    return scores


def out_neighbours(graph: nx.DiGraph, *, node: str, limit: int = 10) -> list[tuple[str, float]]:
    """The node's successors by descending weight (ties by id): "what usually comes next"."""
    if node not in graph:
        return []
    ranked = sorted(graph[node].items(), key=lambda item: (-item[1].get("weight", 1.0), item[0]))
    return [(dst, float(data.get("weight", 1.0))) for dst, data in ranked[:limit]]
