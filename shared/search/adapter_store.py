"""The tenants' query adapters in the database (migration 0025) and the search's cache of them.

A search must map its query before the dense statement, which runs in the evidence round
trip, so it cannot wait for the database to say which adapter is current. It maps the
query with the adapter this process holds for the tenant (none: the query as embedded)
and reads the current version in the same round trip; when they differ (once per process
after each consolidation that ships) it loads the new matrix and re-runs the dense
statement. Steady state: no extra round trip, one small indexed read in the pipeline.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from shared.db import database_key

# The version a search compares against its cached one (0: no adapter shipped).
ADAPTER_VERSION_SQL = """
SELECT coalesce(max(version), 0) AS version FROM query_adapters
 WHERE tenant_id = %s AND shipped
"""


@dataclass(frozen=True)
class Held:
    """One tenant's adapter as a process holds it."""

    version: int
    matrix: np.ndarray | None
    # The newest learned run the adapter was fitted on: the vote counts the newer ones.
    last_intent_id: int = 0


NONE = Held(version=0, matrix=None)


def load_adapter(conn: psycopg.Connection[Any], *, tenant_id: str) -> Held:
    """The tenant's newest shipped adapter (``NONE`` when it has none)."""
    row = conn.execute(
        "SELECT version, matrix, dim, last_intent_id FROM query_adapters "
        "WHERE tenant_id = %s AND shipped AND matrix IS NOT NULL "
        "ORDER BY version DESC LIMIT 1",
        (tenant_id,),
    ).fetchone()
    if row is None:
        return NONE
    dim = int(row["dim"])
    matrix = np.frombuffer(bytes(row["matrix"]), dtype=np.float32).reshape(dim, dim)
    return Held(
        version=int(row["version"]),
        matrix=matrix.copy(),
        last_intent_id=int(row["last_intent_id"]),
    )


# The tenant's newest consolidation pass and the version in use (what the dashboard shows).
ADAPTER_PASSES_SQL = """
(SELECT 'last' AS row, version, trained_on, held_back, score_before, score_after, shipped,
        created_at
   FROM query_adapters WHERE tenant_id = %(t)s ORDER BY version DESC LIMIT 1)
UNION ALL
(SELECT 'in_use', version, trained_on, held_back, score_before, score_after, shipped,
        created_at
   FROM query_adapters WHERE tenant_id = %(t)s AND shipped ORDER BY version DESC LIMIT 1)
"""


def adapter_passes(conn: psycopg.Connection[Any], *, tenant_id: str) -> dict[str, dict[str, Any]]:
    """{"last": the newest pass, "in_use": the newest shipped one}, each only if there is one:
    version, training and held-back sizes, held-back top-1 before/after, shipped, when."""
    rows = conn.execute(ADAPTER_PASSES_SQL, {"t": tenant_id}).fetchall()
    return {r["row"]: {k: v for k, v in r.items() if k != "row"} for r in rows}


def matrix_bytes(matrix: np.ndarray) -> bytes:
    """A matrix as stored (float32, row-major)."""
    return np.ascontiguousarray(matrix, dtype=np.float32).tobytes()


class AdapterCache:
    """Per process: (database, tenant) → the adapter last loaded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], Held] = {}

    def held(self, conn: psycopg.Connection[Any], *, tenant_id: str) -> Held:
        with self._lock:
            return self._held.get((database_key(conn), tenant_id), NONE)

    def refresh(self, conn: psycopg.Connection[Any], *, tenant_id: str, version: int) -> Held:
        """The adapter of ``version`` (read when the cache holds another)."""
        current = self.held(conn, tenant_id=tenant_id)
        if current.version == version:
            return current
        loaded = load_adapter(conn, tenant_id=tenant_id) if version else NONE
        with self._lock:
            self._held[(database_key(conn), tenant_id)] = loaded
        return loaded

    def clear(self) -> None:
        with self._lock:
            self._held.clear()


ADAPTERS = AdapterCache()
