"""Rows of the `tools` table: lookups by id, the listing, the toolhost's sync writes, graph metrics.

Keyword-only functions over the caller's connection (and so its transaction). The search
index's own ranking queries (vector and full-text nearest neighbours, PageRanks) stay in
``shared.search``: they are how search ranks, not how a tool is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from shared.server_states import ServerState
from shared.versioned import VersionedCache

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

# What a reader gets for one tool; the embedding stays in the table (search reads it there).
TOOL_COLUMNS = (
    "id, server, name, description, input_schema, available, pagerank, community, "
    "annotations, output_schema, cache_override, pii"
)


def get_tools(
    conn: Conn, *, ids: Sequence[str], similar_to: np.ndarray | None = None
) -> dict[str, Row]:
    """The known tools among ``ids``, by id; with ``similar_to``, each row's cosine
    similarity to that vector as ``semantic`` (None for a tool without an embedding)."""
    if not ids:
        return {}
    semantic = (
        ", CASE WHEN embedding IS NULL THEN NULL ELSE 1 - (embedding <=> %(q)s) END AS semantic"
        if similar_to is not None
        else ""
    )
    rows = conn.execute(
        f"SELECT {TOOL_COLUMNS}{semantic} FROM tools WHERE id = ANY(%(ids)s)",
        {"ids": list(ids), "q": similar_to},
    ).fetchall()
    return {r["id"]: r for r in rows}


def list_tools(conn: Conn, *, include_removed: bool = False) -> list[Row]:
    """The tools of configured servers, by id, with their server's state (``server_state``: why
    one is unavailable); ``include_removed`` adds those of servers that left the configuration
    (``removed``: history only, as the dashboard's graphs of past runs show them)."""
    return _with_server_state(conn, TOOL_COLUMNS, include_removed=include_removed)


def run_tools(conn: Conn) -> list[Row]:
    """Every known tool, by id, as ``list_tools(include_removed=True)`` lists it, and its
    ``schema_hash``: one read serving a run's tool scope (``configured`` of these) and its
    cache settings (``cache_settings`` reads the same tools, removed servers' included)."""
    return _with_server_state(conn, f"{TOOL_COLUMNS}, schema_hash", include_removed=True)


# ``tools_state.version`` (migration 0027) moves with every column ``run_tools`` reads.
TOOLS_VERSION_SQL = "SELECT version FROM tools_state"
_RUN_TOOLS = VersionedCache(run_tools)


def run_tools_at(conn: Conn, *, version: Any) -> list[Row]:
    """``run_tools`` as of ``version`` (``TOOLS_VERSION_SQL``, read by the caller before): kept
    in this process while the version stays, read again once it moved. The rows are shared:
    read them, never change them. No version (the table is gone or empty): read now."""
    if version is None:
        return run_tools(conn)
    return _RUN_TOOLS.get(conn, version=version)


def awaiting_servers(conn: Conn) -> frozenset[str]:
    """Servers waiting for a person to connect them (``needs_user_authorization``) whose tools
    nobody has listed yet: a call to one of them goes to the toolhost, which answers with a
    connect link, instead of being refused as an unknown tool."""
    rows = conn.execute(
        "SELECT m.name FROM mcp_servers m WHERE m.state = %s "
        "AND NOT EXISTS (SELECT 1 FROM tools t WHERE t.server = m.name)",
        (ServerState.NEEDS_USER_AUTHORIZATION.value,),
    ).fetchall()
    return frozenset(_first(r) for r in rows)


# Its inputs (``mcp_servers.state``, the tools' rows) move ``tools_state.version`` too.
_AWAITING = VersionedCache(awaiting_servers)


def awaiting_servers_at(conn: Conn, *, version: Any) -> frozenset[str]:
    """``awaiting_servers`` as of ``version``, as ``run_tools_at``."""
    if version is None:
        return awaiting_servers(conn)
    return _AWAITING.get(conn, version=version)


def tools_held(
    conn: psycopg.AsyncConnection[Any], *, version: Any
) -> tuple[list[Row], frozenset[str]] | None:
    """``run_tools_at`` and ``awaiting_servers_at`` as of ``version`` (``TOOLS_VERSION_SQL``
    read on ``conn``) when both are held in this process already; None: read them (blocking)."""
    if version is None:
        return None
    rows = _RUN_TOOLS.held(conn, version=version)
    awaiting = _AWAITING.held(conn, version=version)
    return None if rows is None or awaiting is None else (rows, awaiting)


def tools_held_at(key: str, *, version: Any) -> tuple[list[Row], frozenset[str]] | None:
    """``tools_held`` for the database ``key`` names, at a version heard rather than read
    (``shared.tools.watch``)."""
    rows = _RUN_TOOLS.held_at(key, version=version)
    awaiting = _AWAITING.held_at(key, version=version)
    return None if rows is None or awaiting is None else (rows, awaiting)


def tools_version(conn: Conn) -> Any:
    """The tools' version now (None if unknown: ``run_tools_at`` then reads)."""
    found = conn.execute(TOOLS_VERSION_SQL).fetchone()
    return None if found is None else _first(found)


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _with_server_state(conn: Conn, columns: str, *, include_removed: bool) -> list[Row]:
    prefixed = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    configured = "" if include_removed else "WHERE s.state IS DISTINCT FROM %(removed)s "
    return conn.execute(
        f"SELECT {prefixed}, s.state AS server_state "
        f"FROM tools t LEFT JOIN mcp_servers s ON s.name = t.server {configured}ORDER BY t.id",
        {"removed": ServerState.REMOVED.value},
    ).fetchall()


def configured(rows: Sequence[Row]) -> list[Row]:
    """The rows ``list_tools`` (without removed servers) would have read."""
    return [r for r in rows if r["server_state"] != ServerState.REMOVED.value]


def available_ids(conn: Conn, *, ids: Sequence[str]) -> set[str]:
    """The ids among ``ids`` of tools that can be called now."""
    if not ids:
        return set()
    rows = conn.execute(
        "SELECT id FROM tools WHERE id = ANY(%s) AND available", (list(ids),)
    ).fetchall()
    return {row["id"] for row in rows}


def search_text(*, server: str, name: str, description: str) -> str:
    """The text a tool is searched by (what its embedding is of): its server's name, its
    name and its description. The server says what a tool is for when its description does
    not ("remember that Alice works at Acme" asks for the ``memory`` server's
    ``add_observations``, "Add new observations to existing entities in the knowledge
    graph"); with it dense retrieval ranks better on every set it was tried on (docs/search.md)."""
    return f"{server} {name}: {description}"


# ``search_text`` in SQL: a stored tool whose text differs is embedded again by the next sync.
SEARCH_TEXT_SQL = "server || ' ' || name || ': ' || description"


def server_tools(conn: Conn, *, server: str) -> dict[str, Row]:
    """A server's stored tools by id: schema hash, cache settings, the searched text, whether it
    lacks a vector."""
    rows = conn.execute(
        "SELECT id, schema_hash, embedding IS NULL AS missing_embedding, annotations, "
        f"cache_override, {SEARCH_TEXT_SQL} AS text FROM tools WHERE server = %s",
        (server,),
    ).fetchall()
    return {row["id"]: dict(row) for row in rows}


def upsert_tool(
    conn: Conn,
    *,
    tool_id: str,
    server: str,
    name: str,
    description: str,
    input_schema: dict[str, Any],
    schema_hash: str,
    embedding: list[float] | None,
    annotations: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    cache_override: dict[str, Any] | None = None,
    available: bool = True,
    pii_kinds: list[str] | None = None,
) -> None:
    """Insert or refresh one listed tool (available again unless it is never callable); a
    missing vector keeps the old one."""
    conn.execute(
        """
        INSERT INTO tools (id, server, name, description, input_schema, schema_hash,
                           embedding, annotations, output_schema, cache_override,
                           available, pii, updated_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
        ON CONFLICT (id) DO UPDATE SET
            description = EXCLUDED.description,
            input_schema = EXCLUDED.input_schema,
            schema_hash = EXCLUDED.schema_hash,
            embedding = COALESCE(EXCLUDED.embedding, tools.embedding),
            annotations = EXCLUDED.annotations,
            output_schema = EXCLUDED.output_schema,
            cache_override = EXCLUDED.cache_override,
            available = EXCLUDED.available,
            pii = EXCLUDED.pii,
            updated_at = now()
        """,
        (
            tool_id, server, name, description, Jsonb(input_schema), schema_hash,
            None if embedding is None else np.asarray(embedding, dtype=np.float32),
            Jsonb(annotations or {}),
            None if output_schema is None else Jsonb(output_schema),
            Jsonb(cache_override or {}),
            available,
            None if pii_kinds is None else Jsonb({"kinds": pii_kinds}),
        ),
    )  # fmt: skip


def delete_tools(conn: Conn, *, ids: Sequence[str]) -> None:
    """Forget these tools (a server stopped listing them)."""
    conn.execute("DELETE FROM tools WHERE id = ANY(%s)", (list(ids),))


def mark_server_unavailable(conn: Conn, *, server: str) -> None:
    """Every tool of a server that is not ready becomes unavailable (kept for search history)."""
    conn.execute(
        "UPDATE tools SET available = false, updated_at = now() WHERE server = %s AND available",
        (server,),
    )


def mark_unavailable_except(conn: Conn, *, servers: Sequence[str]) -> None:
    """Every tool of a server not among ``servers`` (it left the configuration) becomes unavailable."""
    conn.execute(
        "UPDATE tools SET available = false, updated_at = now() "
        "WHERE NOT (server = ANY(%s)) AND available",
        (list(servers),),
    )


def set_graph_metrics(conn: Conn, *, rows: Sequence[tuple[str, float, int | None]]) -> None:
    """Store (id, PageRank, community) per tool; tools left out fall back to neutral."""
    with conn.cursor() as cur:
        cur.execute("UPDATE tools SET pagerank = 0, community = NULL WHERE community IS NOT NULL")
        if not rows:
            return
        # COPY into a temp table and one joined UPDATE: thousands of tools in one statement.
        cur.execute("CREATE TEMP TABLE _m (id text, pr float8, comm int) ON COMMIT DROP")
        with cur.copy("COPY _m (id, pr, comm) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(
            "UPDATE tools t SET pagerank = m.pr, community = m.comm FROM _m m WHERE t.id = m.id"
        )
