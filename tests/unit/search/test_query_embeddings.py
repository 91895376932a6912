"""Query embeddings: the fast path agrees with ``embed``; the gateway's LRU embeds once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from services.gateway.ops.tool_search import QueryEmbeddings
from shared.config import Settings
from shared.embeddings import Embedder, get_embedder
from shared.embeddings.plan import MAX_PLAN_TEXTS
from shared.search.hybrid import embed_texts_for_query


def test_embed_query_matches_embed() -> None:
    embedder = get_embedder(Settings(embedding_model="all-MiniLM-L6-v2"))
    texts = embed_texts_for_query(
        "Fetch the latest stock prices, draw a bar chart and then write a PDF report."
    )
    assert len(texts) == 4  # the query and its three clauses, of different lengths
    fast = np.asarray(embedder.embed_query(texts))
    exact = np.asarray(embedder.embed(texts))
    assert fast.shape == exact.shape == (4, 384)
    assert np.linalg.norm(fast, axis=1) == pytest.approx(1.0, abs=1e-5)
    assert (fast * exact).sum(axis=1).min() > 0.999  # cosine with the stored-side vectors
    assert embedder.embed_query([]) == []


class _CountingEmbedder(Embedder):
    def __init__(self) -> None:
        super().__init__(model_name="stub")
        self.calls: list[list[str]] = []

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t))] for t in texts]


def test_repeated_queries_are_embedded_once_and_old_ones_evicted() -> None:
    embedder = _CountingEmbedder()
    cache = QueryEmbeddings(size=2)
    first = cache.get(embedder, "read a file and then send it by mail")
    assert cache.get(embedder, "read a file and then send it by mail") == first
    assert len(embedder.calls) == 1 and len(first) == 3  # query + 2 clauses
    cache.get(embedder, "b")
    cache.get(embedder, "c")  # evicts the least recently used: the first query
    cache.get(embedder, "read a file and then send it by mail")
    assert len(embedder.calls) == 4


def test_more_texts_than_the_planner_takes_are_embedded_in_batches() -> None:
    embedder = get_embedder(Settings(embedding_model="all-MiniLM-L6-v2"))
    texts = [f"step {i} of a long batch" for i in range(MAX_PLAN_TEXTS + 1)]
    fast = np.asarray(embedder.embed_query(texts))
    assert fast.shape == (MAX_PLAN_TEXTS + 1, 384)
    assert (fast * np.asarray(embedder.embed(texts))).sum(axis=1).min() > 0.9999
