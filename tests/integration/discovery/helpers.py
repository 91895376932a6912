"""Vectors with chosen cosine similarity and rows for discovery tests (no model needed)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

DIM = 384


def basis(i: int) -> np.ndarray:
    """Unit vector along axis i."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def at_similarity(base: np.ndarray, other: np.ndarray, cosine: float) -> list[float]:
    """A unit vector whose cosine with ``base`` is ``cosine`` (``other`` ⟂ ``base``)."""
    v = cosine * base + math.sqrt(1.0 - cosine**2) * other
    return [float(x) for x in v]


def insert_capability(
    conn: psycopg.Connection[Any],
    *,
    name: str,
    embedding: np.ndarray | list[float],
    success_rate: float = 0.8,
    usage_count: int = 5,
    tools_used: list[str] | None = None,
    community: int | None = None,
    schema: dict[str, Any] | None = None,
    tenant_id: str = "default",
) -> str:
    code = f"return {name!r}"
    row = conn.execute(
        """
        INSERT INTO capabilities (tenant_id, code_hash, code, intent, intent_embedding, name,
                                  description, parameters_schema, tools_used, usage_count,
                                  success_rate, community)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id
        """,
        (
            tenant_id,
            hashlib.sha256(code.encode()).hexdigest(),
            code,
            f"intent of {name}",
            np.asarray(embedding, dtype=np.float32),
            name,
            f"does {name}",
            Jsonb(schema or {"type": "object", "properties": {}}),
            Jsonb(tools_used or []),
            usage_count,
            success_rate,
            community,
        ),
    ).fetchone()
    conn.commit()
    assert row is not None
    return str(row["id"])


def insert_tool(
    conn: psycopg.Connection[Any],
    *,
    tool_id: str,
    description: str,
    embedding: np.ndarray | list[float] | None,
    community: int | None = None,
    pagerank: float = 0.0,
) -> None:
    server, name = tool_id.split(":", 1)
    conn.execute(
        "INSERT INTO tools (id, server, name, description, schema_hash, embedding, community, "
        "pagerank) VALUES (%s, %s, %s, %s, '', %s, %s, %s)",
        (
            tool_id,
            server,
            name,
            description,
            None if embedding is None else np.asarray(embedding, dtype=np.float32),
            community,
            pagerank,
        ),
    )
    conn.commit()


def insert_edge(
    conn: psycopg.Connection[Any],
    *,
    src: str,
    dst: str,
    kind: str = "sequence",
    weight: float = 1.0,
) -> None:
    conn.execute(
        "INSERT INTO tool_edges (src, dst, kind, weight, count) VALUES (%s, %s, %s, %s, 1)",
        (src, dst, kind, weight),
    )
    conn.commit()
