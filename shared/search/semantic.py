"""Dense tool search over pgvector's HNSW index: cosine similarity of the query to name+description."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg


def semantic_tool_search(
    conn: psycopg.Connection[dict[str, Any]],
    *,
    query_embedding: list[float],
    limit: int,
    available_only: bool = False,
) -> list[dict[str, Any]]:
    """Top ``limit`` tools by cosine similarity, each with its ``semantic_score``."""
    vector = np.asarray(query_embedding, dtype=np.float32)
    where = "WHERE embedding IS NOT NULL" + (" AND available" if available_only else "")
    return conn.execute(
        f"""
        SELECT id, server, name, description, input_schema, available, pagerank,
               1 - (embedding <=> %(q)s) AS semantic_score
          FROM tools {where}
         ORDER BY embedding <=> %(q)s
         LIMIT %(limit)s
        """,
        {"q": vector, "limit": limit},
    ).fetchall()
