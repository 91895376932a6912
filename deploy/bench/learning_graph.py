"""Synthetic tool graphs shaped like ``tool_edges``, for `agentcards bench learning`."""

from __future__ import annotations

from typing import Literal

import networkx as nx
import numpy as np

from shared.graph.metrics import EdgeRow
from shared.graph.weights import EdgeKind, edge_weight

GraphModel = Literal["clustered", "barabasi_albert"]

# Tools per MCP server in the clustered model: typical servers expose 5-40 tools.
SERVER_SIZE = 20
# Share of edges that stay inside one server: workflows mostly chain tools of the
# same server (read → write, search → get) and cross over less often.
P_WITHIN_SERVER = 0.8
# Zipf exponent of tool popularity: a few tools are in most traces.
POPULARITY_EXPONENT = 0.8
# Kinds in proportions a trace produces them (co_used grows with tools per run).
KIND_SHARES = {
    EdgeKind.SEQUENCE: 0.4,
    EdgeKind.CO_USED: 0.4,
    EdgeKind.CONTAINS: 0.15,
    EdgeKind.CALLS: 0.05,
}


def synthetic_edges(
    *, n_tools: int, n_edges: int, seed: int = 0, model: GraphModel = "clustered"
) -> list[EdgeRow]:
    """Random edge rows shaped like ``tool_edges``: scale-free-ish degrees, counts ≥ 1."""
    rng = np.random.default_rng(seed)
    if model == "barabasi_albert":
        # No community structure at all: Louvain's worst case on this size.
        graph = nx.barabasi_albert_graph(n_tools, max(1, n_edges // n_tools), seed=seed)
        pairs = np.array(graph.edges(), dtype=np.int64)
        flip = rng.random(len(pairs)) < 0.5
        pairs[flip] = pairs[flip][:, ::-1]
    else:
        pairs = _clustered_pairs(rng, n_tools=n_tools, n_edges=n_edges)
    kinds = rng.choice(list(KIND_SHARES), size=len(pairs), p=list(KIND_SHARES.values()))
    counts = rng.geometric(0.3, size=len(pairs))  # most edges seen a few times, some often
    return [
        (f"srv{src // SERVER_SIZE}:tool{src}", f"srv{dst // SERVER_SIZE}:tool{dst}", str(kind),
         edge_weight(kind=kind, count=int(count)))
        for (src, dst), kind, count in zip(pairs.tolist(), kinds, counts, strict=True)
    ]  # fmt: skip


def _clustered_pairs(rng: np.random.Generator, *, n_tools: int, n_edges: int) -> np.ndarray:
    popularity = 1.0 / np.arange(1, n_tools + 1) ** POPULARITY_EXPONENT
    rng.shuffle(popularity)
    popularity /= popularity.sum()
    found = np.empty((0, 2), dtype=np.int64)
    while len(found) < n_edges:
        size = 2 * (n_edges - len(found)) + 16  # oversample: duplicates and self-loops go
        src = rng.choice(n_tools, size=size, p=popularity)
        start = (src // SERVER_SIZE) * SERVER_SIZE
        width = np.minimum(SERVER_SIZE, n_tools - start)
        local = start + (rng.random(size) * width).astype(np.int64)
        remote = rng.choice(n_tools, size=size, p=popularity)
        dst = np.where(rng.random(size) < P_WITHIN_SERVER, local, remote)
        pairs = np.stack([src, dst], axis=1)[src != dst]
        merged = np.concatenate([found, pairs])
        _, first = np.unique(merged, axis=0, return_index=True)
        found = merged[np.sort(first)]
    return found[:n_edges]
