"""The ``embedding_cache`` table: vectors by model and text hash, computed once per text."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.rows import dict_row

if TYPE_CHECKING:
    import psycopg

    from shared.embeddings.embedder import Embeds


def text_hash(*, model: str, text: str) -> str:
    """Key of ``embedding_cache``: sha256 of model name and text (a NUL keeps them apart)."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def embed_cached(
    *, conn: psycopg.Connection[Any], embedder: Embeds, texts: Sequence[str]
) -> list[list[float]]:
    """Embeddings of ``texts`` in order, read from ``embedding_cache`` or computed and stored.

    Runs inside the caller's transaction (the caller commits). Concurrent writers of
    the same text are harmless: ``ON CONFLICT DO NOTHING`` keeps the first, and both
    computed the same vector.
    """
    if not texts:
        return []
    model = embedder.model_name
    hashes = [text_hash(model=model, text=text) for text in texts]
    found: dict[str, list[float]] = {}
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT text_hash, embedding FROM embedding_cache "
            "WHERE model = %s AND text_hash = ANY(%s)",
            (model, list(dict.fromkeys(hashes))),
        )
        for row in cur.fetchall():
            found[row["text_hash"]] = vector_to_list(row["embedding"])
        missing = {h: text for h, text in zip(hashes, texts, strict=True) if h not in found}
        if missing:
            vectors = embedder.embed(list(missing.values()))
            cur.executemany(
                "INSERT INTO embedding_cache (text_hash, model, embedding) VALUES (%s, %s, %s) "
                "ON CONFLICT (model, text_hash) DO NOTHING",
                [
                    (h, model, np.asarray(vector, dtype=np.float32))
                    for h, vector in zip(missing, vectors, strict=True)
                ],
            )
            found.update(zip(missing, vectors, strict=True))
    return [found[h] for h in hashes]


def vector_to_list(value: Any) -> list[float]:
    """A stored vector column value as a list of floats (whatever pgvector returns)."""
    # pgvector >= 0.4 returns a Vector object, older versions a numpy array.
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).tolist()
