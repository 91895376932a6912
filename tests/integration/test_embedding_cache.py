"""The embedding cache in real Postgres: a text is embedded once per model, then read back."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, embed_cached, get_embedder, text_hash

pytestmark = pytest.mark.integration


class CountingEmbedder(Embedder):
    """The real model, counting the texts it actually had to embed."""

    def __init__(self) -> None:
        super().__init__(model_name="all-MiniLM-L6-v2", expected_dim=384)
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return super().embed(texts)


def test_second_lookup_reads_the_cache_and_matches(pg_url: str) -> None:
    embedder = CountingEmbedder()
    texts = ["read a file", "send an email", "read a file"]
    with connect(pg_url) as conn:
        first = embed_cached(conn=conn, embedder=embedder, texts=texts)
        conn.commit()
    assert embedder.embedded == ["read a file", "send an email"]  # duplicates embedded once
    assert len(first) == 3 and len(first[0]) == 384
    assert first[0] == first[2]

    with connect(pg_url) as conn:
        again = embed_cached(conn=conn, embedder=embedder, texts=["send an email", "new text"])
        conn.commit()
        rows = conn.execute(
            "SELECT model, text_hash FROM embedding_cache ORDER BY created_at"
        ).fetchall()
    assert embedder.embedded[2:] == ["new text"]  # only the unseen text hit the model
    assert again[0] == pytest.approx(first[1], abs=1e-6)
    assert len(rows) == 3
    assert {r["text_hash"] for r in rows} >= {
        text_hash(model="all-MiniLM-L6-v2", text="read a file")
    }


def test_cache_is_keyed_by_model(pg_url: str) -> None:
    real = get_embedder(Settings(embedding_model="all-MiniLM-L6-v2"))
    with connect(pg_url) as conn:
        embed_cached(conn=conn, embedder=real, texts=["hello"])
        conn.commit()
        other = CountingEmbedder()
        other.model_name = "sentence-transformers/all-MiniLM-L6-v2"  # same weights, other name
        embed_cached(conn=conn, embedder=other, texts=["hello"])
        conn.commit()
        count = conn.execute("SELECT count(*) AS n FROM embedding_cache").fetchone()
    assert other.embedded == ["hello"]
    assert count is not None and count["n"] == 2
