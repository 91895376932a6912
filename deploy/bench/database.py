"""A throwaway migrated database for the search and match benchmarks, and tool indexing."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from deploy.bench.datasets import Tool
from deploy.launcher.embedded import EmbeddedPostgres
from shared.config import Settings
from shared.db import migrate


@contextmanager
def bench_database(settings: Settings | None = None) -> Iterator[tuple[str, Settings]]:
    """A fresh migrated database (on AGENTCARDS_DATABASE_URL's server, else an embedded one)."""
    base = Settings()
    server_url = base.database_url
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        embedded = None
        if not server_url:
            embedded = EmbeddedPostgres.start(Path(tmp) / "pgdata")
            server_url = embedded.url
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
        settings = base.model_copy(update={"database_url": url, "redis_url": "redis://unused"})
        try:
            migrate(settings)
            yield url, settings
        finally:
            with psycopg.connect(server_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            if embedded is not None:
                embedded.stop()


def index_tools(
    conn: psycopg.Connection[Any], *, tools: Sequence[Tool], vectors: np.ndarray
) -> None:
    """Insert tools with their embeddings and annotations, as the toolhost's sync does."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tools (id, server, name, description, input_schema, schema_hash, "
            "embedding, annotations) VALUES (%s, %s, %s, %s, %s, '', %s, %s)",
            [
                (
                    t.id,
                    t.server,
                    t.name,
                    t.description,
                    Jsonb(t.input_schema),
                    v,
                    Jsonb(t.annotations),
                )
                for t, v in zip(tools, vectors, strict=True)
            ],
        )
    conn.commit()
