"""The tool graph in memory for search: Adamic-Adar and next steps without a query per request.

Computed in SQL, the graph signals cost 3-6 ms a search at 100k edges (the degree of
every common neighbour, a hub's thousands of edges). A process keeps the graph as
arrays instead, keyed by the version migration 0006 keeps: a search reads the version
in its first round trip and uses the snapshot while the version holds.

When the graph moves (learning workers write edges continuously), a graph that
loads fast is reloaded on the spot, so a search sees every committed edge; one whose
load took longer than ``SYNC_RELOAD_MS`` is reloaded on a thread of its own while
searches use the previous snapshot, so no request waits for a big reload.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from shared.db import database_key

log = logging.getLogger(__name__)

# Below this load time (about 10k edges on a 2-core VM) a stale graph is reloaded in
# the request that finds it stale: fresh answers for a few milliseconds once.
SYNC_RELOAD_MS = 25.0

# The database's oid too: a database dropped and made again under the same name starts
# counting from zero again. And the reader's own transaction id if it has written: a
# graph read with its uncommitted edges is then cached under a version nobody else
# will read, even when its writes roll back and others' bring the sum back to it.
GRAPH_VERSION_SQL = """
SELECT (SELECT oid FROM pg_database WHERE datname = current_database())::text
       || ':' || coalesce(sum(writes), 0)::text
       || coalesce(':' || pg_current_xact_id_if_assigned()::text, '') AS version
  FROM tool_edges_writes
"""

# Each backend that ever wrote edges keeps a row; those of ended backends are folded
# into row 0, which keeps the sum (the version does not move) and the table as small
# as the set of connections alive.
_FOLD_ENDED_WRITERS_SQL = """
WITH ended AS (
    DELETE FROM tool_edges_writes AS w
     WHERE w.backend_pid <> 0
       AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = w.backend_pid)
    RETURNING w.writes
)
INSERT INTO tool_edges_writes (backend_pid, writes)
SELECT 0, sum(writes) FROM ended HAVING count(*) > 0
ON CONFLICT (backend_pid) DO UPDATE SET writes = tool_edges_writes.writes + EXCLUDED.writes
"""


def fold_ended_writers(conn: psycopg.Connection[Any]) -> None:
    """Fold the write counts of backends that have ended into one row (same version)."""
    conn.execute(_FOLD_ENDED_WRITERS_SQL)


def graph_version(cursor: Any) -> str:
    """The version from a cursor that ran ``GRAPH_VERSION_SQL`` (dict rows)."""
    row = cursor.fetchone()
    return str(row["version"]) if row else ""


# Graph edges as build_graph sees them: a positive weight, never a self loop. Migration
# 0004's partial index on (src) INCLUDE (dst, kind, weight) answers this from the index.
_EDGES_SQL = "SELECT src, dst, kind, weight FROM tool_edges WHERE weight > 0 AND dst <> src"


@dataclass(frozen=True)
class GraphSnapshot:
    """The graph at one version: undirected neighbour sets and ranked successors, as CSR arrays."""

    version: str
    ids: list[str]  # node position -> id, in id order
    index: dict[str, int]  # id -> node position
    # Distinct undirected neighbours of node i: neighbours[neighbour_ptr[i]:neighbour_ptr[i + 1]].
    neighbour_ptr: np.ndarray
    neighbours: np.ndarray
    inverse_log_degree: np.ndarray  # 1 / ln(degree); 0 where the degree is below 2
    # Successors of node i, by summed weight (desc) then id, laid out the same way.
    successor_ptr: np.ndarray
    successors: np.ndarray
    successor_weights: np.ndarray
    load_ms: float

    def adamic_adar(self, context: Sequence[str], candidates: Sequence[str]) -> dict[str, float]:
        """Σ over context nodes c, Σ over common neighbours z of c and x, 1 / ln deg(z), per
        candidate x that is not in the context; candidates without one are left out."""
        # Summed over the context, a common neighbour z counts once per context node it
        # touches: weight each node by that count, then sum a candidate's neighbours.
        weight = np.zeros(len(self.ids))
        context_nodes = [self.index[c] for c in dict.fromkeys(context) if c in self.index]
        for node in context_nodes:
            weight[self._neighbours(node)] += 1.0
        weight *= self.inverse_log_degree
        scores: dict[str, float] = {}
        excluded = set(context)
        for candidate in dict.fromkeys(candidates):
            position = self.index.get(candidate)
            if position is None or candidate in excluded:
                continue
            score = float(weight[self._neighbours(position)].sum())
            if score > 0:
                scores[candidate] = score
        return scores

    def following(self, node_id: str, *, limit: int) -> list[tuple[str, float]]:
        """What usually comes after ``node_id``: successors by summed weight (co_used both ways)."""
        node = self.index.get(node_id)
        if node is None:
            return []
        start, end = (
            self.successor_ptr[node],
            min(self.successor_ptr[node + 1], self.successor_ptr[node] + limit),
        )
        return [
            (self.ids[int(n)], float(w))
            for n, w in zip(
                self.successors[start:end], self.successor_weights[start:end], strict=True
            )
        ]

    def _neighbours(self, node: int) -> np.ndarray:
        return self.neighbours[self.neighbour_ptr[node] : self.neighbour_ptr[node + 1]]


def build_snapshot(
    *,
    version: str,
    ids: list[str],
    src: np.ndarray,
    dst: np.ndarray,
    co_used: np.ndarray,
    weight: np.ndarray,
    load_ms: float = 0.0,
) -> GraphSnapshot:
    """A snapshot of graph edges given as node positions in ``ids`` (sorted) and weights."""
    n = len(ids)
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    # Undirected, distinct neighbours (parallel edges of several kinds count once).
    pairs = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    owner, neighbour = pairs // n, pairs % n
    neighbour_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))])
    degree = np.diff(neighbour_ptr).astype(np.float64)
    inverse_log_degree = np.zeros(n)
    np.divide(
        1.0,
        np.log(degree, where=degree >= 2, out=np.ones(n)),
        out=inverse_log_degree,
        where=degree >= 2,
    )

    # Successors: every edge forward, co_used edges (stored once per pair) backward too.
    keys = np.concatenate([src * n + dst, dst[co_used] * n + src[co_used]])
    unique_keys, inverse = np.unique(keys, return_inverse=True)
    summed = np.bincount(inverse, weights=np.concatenate([weight, weight[co_used]]))
    from_node, to_node = unique_keys // n, unique_keys % n
    order = np.lexsort((to_node, -summed, from_node))  # by node, weight desc, then id
    successor_ptr = np.concatenate([[0], np.cumsum(np.bincount(from_node, minlength=n))])
    return GraphSnapshot(
        version=version,
        ids=ids,
        index={node: i for i, node in enumerate(ids)},
        neighbour_ptr=neighbour_ptr,
        neighbours=neighbour,
        inverse_log_degree=inverse_log_degree,
        successor_ptr=successor_ptr,
        successors=to_node[order],
        successor_weights=summed[order],
        load_ms=load_ms,
    )


# Nodes numbered in byte order of their ids (COLLATE "C", what Python's sorted() gives),
# so "ties by id" mean the same in SQL and here.
_NODES_CTE = f"""
WITH e AS MATERIALIZED ({_EDGES_SQL}),
n AS (
    SELECT id, (row_number() OVER (ORDER BY id COLLATE "C") - 1)::int4 AS i
      FROM (SELECT src AS id FROM e UNION SELECT dst FROM e) AS u
)
"""
# One statement, so nodes and edges come from one snapshot of the table: the node
# list, then each edge column as one bytea of big-endian values (all aggregates of a
# query level see the rows in the same order) that numpy reads without a Python object
# per edge, so a reload in a background thread hardly holds the GIL request threads need.
_GRAPH_ARRAYS_SQL = (
    _NODES_CTE
    + """
SELECT (SELECT array_agg(id ORDER BY i) FROM n) AS ids,
       string_agg(int4send(s.i), '') AS src,
       string_agg(int4send(d.i), '') AS dst,
       string_agg(boolsend(e.kind = 'co_used'), '') AS co_used,
       string_agg(float8send(e.weight), '') AS weight
  FROM e JOIN n AS s ON s.id = e.src JOIN n AS d ON d.id = e.dst
"""
)


def load_snapshot(conn: psycopg.Connection[Any], *, version: str) -> GraphSnapshot:
    """Read every graph edge of ``conn``'s database (after reading ``version``) into a snapshot."""
    started = time.perf_counter()
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(_GRAPH_ARRAYS_SQL).fetchone() or {}
    return build_snapshot(
        version=version,
        ids=list(row.get("ids") or []),
        src=np.frombuffer(row.get("src") or b"", dtype=">i4"),
        dst=np.frombuffer(row.get("dst") or b"", dtype=">i4"),
        co_used=np.frombuffer(row.get("co_used") or b"", dtype=bool),
        weight=np.frombuffer(row.get("weight") or b"", dtype=">f8").astype(np.float64),
        load_ms=(time.perf_counter() - started) * 1000,
    )


class GraphSnapshots:
    """Per-database ``GraphSnapshot`` cache (see the module docstring for when it reloads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_db: dict[str, GraphSnapshot] = {}
        self._reloading: set[str] = set()

    def get(self, conn: psycopg.Connection[Any], *, version: str) -> GraphSnapshot:
        """The graph of ``conn``'s database as of ``version`` (read with ``GRAPH_VERSION_SQL``
        before calling), or the previous one while a slow reload runs in the background."""
        key = database_key(conn)
        with self._lock:
            cached = self._by_db.get(key)
            if cached is not None and (cached.version == version or key in self._reloading):
                return cached
            background = cached is not None and cached.load_ms > SYNC_RELOAD_MS
            if background:
                self._reloading.add(key)
        if not background:
            # Read after the version: an edge committed in between makes the next search
            # reload once more, never keeps edges older than their version.
            return self._store(key, load_snapshot(conn, version=version))
        assert cached is not None
        thread = threading.Thread(
            target=self._reload, args=(key, _conninfo(conn)), name="graph-reload", daemon=True
        )
        thread.start()
        return cached

    def clear(self) -> None:
        with self._lock:
            self._by_db.clear()

    def forget_reloads(self) -> None:
        """Drop the marks of reloads in progress (their threads are gone after a fork)."""
        self._lock = threading.Lock()  # a parent thread may have held it at the fork
        self._reloading = set()

    def _store(self, key: str, snapshot: GraphSnapshot) -> GraphSnapshot:
        with self._lock:
            self._by_db[key] = snapshot
        return snapshot

    def _reload(self, key: str, conninfo: str) -> None:
        try:
            with psycopg.connect(conninfo, row_factory=dict_row) as conn:
                # Big graphs only come here: hash joins in memory instead of merge joins
                # over collation-aware sorts spilled to disk (400 -> 170 ms at 100k edges).
                conn.execute("SET work_mem = '64MB'")
                conn.execute("SET enable_mergejoin = off")
                version = graph_version(conn.execute(GRAPH_VERSION_SQL))
                self._store(key, load_snapshot(conn, version=version))
        except psycopg.Error as exc:  # the next stale search tries again
            log.warning("graph snapshot reload failed: %s", exc)
        finally:
            with self._lock:
                self._reloading.discard(key)


def _conninfo(conn: psycopg.Connection[Any]) -> str:
    """The connection parameters of ``conn`` (password included), for a connection of our own."""
    options = {
        o.keyword.decode(): o.val.decode()
        for o in conn.pgconn.info
        if o.val is not None and o.keyword is not None
    }
    return make_conninfo(**options)


GRAPH_SNAPSHOTS = GraphSnapshots()
# A reload thread does not survive a fork: a child must not wait for one forever.
os.register_at_fork(after_in_child=GRAPH_SNAPSHOTS.forget_reloads)
