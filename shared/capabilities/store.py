"""Rows of the `capabilities` table: reads by id, name and intent vector; the learning writes.

Keyword-only functions over the caller's connection (and so its transaction). Deciding
what to write (stats, names, schemas) and scoring matches are plain functions elsewhere
(``shared.capabilities.stats``, ``shared.learning.capability_runs``, ``shared.matching``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from shared.config import DEFAULT_TENANT

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

# Returned to clients and stored in execution extras.
SUMMARY_COLUMNS = (
    "id, name, description, usage_count, success_count, failure_count, success_rate, "
    "avg_duration_ms, tools_used, parameters_schema, promoted_at, version"
)
STATS_FIELDS = ("usage_count", "success_count", "failure_count", "success_rate", "avg_duration_ms")
# Columns a learned run may change on a known capability, with their SQL types.
CHANGE_TYPES = {"code": "text", "parameters_schema": "jsonb", "tools_used": "jsonb"}


def get_capability(conn: Conn, *, ref: str, tenant_id: str = DEFAULT_TENANT) -> Row | None:
    """A capability by id, else by name (its latest version; then the most reliable, most used)."""
    row = None
    if _is_uuid(ref):
        row = conn.execute(
            "SELECT * FROM capabilities WHERE id = %s AND tenant_id = %s", (ref, tenant_id)
        ).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT * FROM capabilities WHERE name = %s AND tenant_id = %s "
            "ORDER BY version DESC, success_rate DESC, usage_count DESC LIMIT 1",
            (ref, tenant_id),
        ).fetchone()
    return row


def list_capabilities(
    conn: Conn, *, tenant_id: str, min_success_rate: float, limit: int, offset: int
) -> tuple[list[Row], int]:
    """One page of a tenant's capabilities at or above a success rate, most used first; and
    how many there are in all."""
    rows = conn.execute(
        """
        SELECT id, name, description, intent, parameters_schema, tools_used, usage_count,
               success_count, failure_count, success_rate, avg_duration_ms, source,
               community, pagerank, last_used, created_at
          FROM capabilities
         WHERE tenant_id = %(tenant)s AND success_rate >= %(rate)s
         ORDER BY usage_count DESC, success_rate DESC, id
         LIMIT %(limit)s OFFSET %(offset)s
        """,
        {"tenant": tenant_id, "rate": min_success_rate, "limit": limit, "offset": offset},
    ).fetchall()
    total = conn.execute(
        "SELECT count(*) AS n FROM capabilities WHERE tenant_id = %s AND success_rate >= %s",
        (tenant_id, min_success_rate),
    ).fetchone()
    return rows, int(total["n"]) if total else 0


def capabilities_by_name(conn: Conn, *, tenant_id: str, names: Sequence[str]) -> list[Row]:
    """Id, name and code of a tenant's enabled capabilities with these names (a disabled one
    is not callable from code: its name resolves to the latest enabled version, or nothing)."""
    return conn.execute(
        # By version: a name's latest version comes last, and the caller keeps the last.
        "SELECT id, name, code, language FROM capabilities WHERE tenant_id = %s AND name = ANY(%s) "
        "AND disabled_at IS NULL ORDER BY version",
        (tenant_id, list(names)),
    ).fetchall()


def names_starting(conn: Conn, *, tenant_id: str, prefix: str, limit: int) -> tuple[list[str], int]:
    """A tenant's capability names starting with ``prefix`` (any case), most used first; and
    how many there are in all (completion shows the first ``limit``)."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = conn.execute(
        """
        SELECT name, count(*) OVER () AS total FROM capabilities
         WHERE tenant_id = %s AND name ILIKE %s AND disabled_at IS NULL
         GROUP BY name ORDER BY max(usage_count) DESC, name LIMIT %s
        """,
        (tenant_id, pattern, limit),
    ).fetchall()
    return [r["name"] for r in rows], int(rows[0]["total"]) if rows else 0


def graph_nodes(conn: Conn, *, tenant_id: str) -> list[Row]:
    """Every capability of a tenant as a graph node (one per family: its latest version):
    usage, success rate, PageRank, community."""
    return conn.execute(
        "SELECT id, name, usage_count, success_rate, pagerank, community, tools_used "
        "FROM capabilities AS c WHERE tenant_id = %s "
        "AND NOT EXISTS (SELECT 1 FROM capabilities AS n WHERE n.tenant_id = c.tenant_id "
        "AND n.version > c.version AND coalesce(n.family_id, n.id) = coalesce(c.family_id, c.id))",
        (tenant_id,),
    ).fetchall()


def nearest(conn: Conn, *, intent_embedding: Sequence[float], tenant_id: str, n: int) -> list[Row]:
    """The ``n`` capabilities whose intent or an alias of it (``capability_aliases``) is
    semantically closest, with the best ``semantic`` similarity and the ``phrasing`` it was;
    disabled ones are never matched, nor a version a later enabled version replaced."""
    # Two HNSW scans side by side (own intents, aliases), then the best per capability.
    return conn.execute(
        """
        WITH hits AS (
            (SELECT id AS capability_id, intent AS phrasing,
                    1 - (intent_embedding <=> %(q)s) AS semantic
               FROM capabilities
              WHERE tenant_id = %(tenant)s AND intent_embedding IS NOT NULL
                AND disabled_at IS NULL
              ORDER BY intent_embedding <=> %(q)s
              LIMIT %(n)s)
            UNION ALL
            (SELECT capability_id, intent, 1 - (intent_embedding <=> %(q)s)
               FROM capability_aliases
              WHERE tenant_id = %(tenant)s
              ORDER BY intent_embedding <=> %(q)s
              LIMIT %(n)s)
        ), best AS (
            SELECT DISTINCT ON (capability_id) capability_id, phrasing, semantic
              FROM hits ORDER BY capability_id, semantic DESC
        )
        SELECT c.id, c.name, c.description, c.intent, c.code, c.parameters_schema,
               c.success_rate, c.usage_count, c.tools_used, c.approval_tools, c.language,
               b.semantic, b.phrasing
          FROM best AS b JOIN capabilities AS c ON c.id = b.capability_id
         WHERE c.disabled_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM capabilities AS n  -- superseded by a live version
                            WHERE n.tenant_id = c.tenant_id AND n.version > c.version
                              AND coalesce(n.family_id, n.id) = coalesce(c.family_id, c.id)
                              AND n.disabled_at IS NULL)
         ORDER BY b.semantic DESC, c.id
         LIMIT %(n)s
        """,
        {"q": np.asarray(intent_embedding, dtype=np.float32), "tenant": tenant_id, "n": n},
    ).fetchall()


def nearest_reliable(
    conn: Conn,
    *,
    queries: Sequence[tuple[Sequence[str], Sequence[float]]],
    tenant_id: str,
    min_success_rate: float,
) -> list[Row]:
    """Per (excluded ids, vector) query, the closest capability at or above the success rate,
    other than the excluded; one statement, rows tagged with their query's 1-based ``i``."""
    return conn.execute(
        """
        SELECT q.i, c.id, c.success_rate, c.tools_used, c.semantic
          FROM unnest(%(vectors)s::vector[], %(excluded)s::text[])
               WITH ORDINALITY AS q(v, excluded, i)
          CROSS JOIN LATERAL (
              SELECT id, success_rate, tools_used, 1 - (intent_embedding <=> q.v) AS semantic
                FROM capabilities
               WHERE tenant_id = %(tenant)s AND intent_embedding IS NOT NULL
                 AND success_rate >= %(rate)s AND disabled_at IS NULL
                 AND NOT (id::text = ANY(string_to_array(q.excluded, ',')))
               ORDER BY intent_embedding <=> q.v
               LIMIT 1) AS c
        """,
        {
            "vectors": [np.asarray(v, dtype=np.float32) for _, v in queries],
            "excluded": [",".join(str(i) for i in ids) for ids, _ in queries],
            "tenant": tenant_id,
            "rate": min_success_rate,
        },
    ).fetchall()


def max_usage_count(conn: Conn, *, tenant_id: str) -> int:
    """The highest usage count among a tenant's capabilities (0 without any)."""
    row = conn.execute(
        "SELECT coalesce(max(usage_count), 0) AS m FROM capabilities WHERE tenant_id = %s",
        (tenant_id,),
    ).fetchone()
    return int(row["m"]) if row else 0


def community_capabilities(conn: Conn, *, tenant_id: str, community: int, limit: int) -> list[Row]:
    """Capabilities in a graph community, most used first.

    In the community: the capability node itself was placed there by Louvain, or
    (before the next graph refresh) one of the tools it uses was.
    """
    return conn.execute(
        """
        SELECT c.id, c.name, c.description, c.success_rate, c.usage_count, c.tools_used
          FROM capabilities c
         WHERE c.tenant_id = %(tenant)s AND c.disabled_at IS NULL
           AND (c.community = %(community)s OR EXISTS (
                 SELECT 1 FROM jsonb_array_elements_text(c.tools_used) AS u(tool)
                   JOIN tools t ON t.id = u.tool
                  WHERE t.community = %(community)s))
         ORDER BY c.usage_count DESC, c.success_rate DESC, c.id
         LIMIT %(n)s
        """,
        {"tenant": tenant_id, "community": community, "n": limit},
    ).fetchall()


def lock_capabilities(
    conn: Conn, *, ids: Sequence[str], keys: Sequence[tuple[str, str]]
) -> list[Row]:
    """Lock (FOR UPDATE) the capabilities with these ids or (tenant, code hash) keys.

    Rows are locked in id order, so concurrent batches cannot deadlock on each other.
    """
    if not ids and not keys:
        return []
    return conn.execute(
        f"""
        SELECT {SUMMARY_COLUMNS}, tenant_id, code_hash, code FROM capabilities
         WHERE id IN (SELECT id FROM capabilities WHERE id = ANY(%(ids)s::uuid[])
                      UNION
                      SELECT c.id FROM capabilities AS c
                        JOIN unnest(%(tenants)s::text[], %(hashes)s::text[]) AS k(t, h)
                          ON c.tenant_id = k.t AND c.code_hash = k.h)
         ORDER BY id
           FOR UPDATE
        """,
        {
            "ids": list(dict.fromkeys(ids)),
            "tenants": [t for t, _ in keys],
            "hashes": [h for _, h in keys],
        },
    ).fetchall()


def update_capabilities(
    conn: Conn, *, updates: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]
) -> dict[str, Row]:
    """Store (id, stats, changed columns) per capability, in id order; summaries by id.

    ``stats`` holds every one of ``STATS_FIELDS``; ``changes`` any of ``CHANGE_TYPES``
    (jsonb values already wrapped), and a column one update leaves out keeps its value.
    """
    if not updates:
        return {}
    columns = sorted({c for _, _, changes in updates for c in changes})
    # Column names come from CHANGE_TYPES, never from input: safe to format in.
    extra = "".join(
        f", {c} = CASE WHEN %({c}_set)s THEN %({c})s::{CHANGE_TYPES[c]} ELSE {c} END"
        for c in columns
    )
    params = []
    for capability_id, stats, changes in sorted(updates, key=lambda u: u[0]):
        p: dict[str, Any] = {"id": capability_id, **{f: stats[f] for f in STATS_FIELDS}}
        for c in columns:
            p[f"{c}_set"] = c in changes
            p[c] = changes.get(c)
        params.append(p)
    with conn.cursor() as cur:
        cur.executemany(
            f"""
            UPDATE capabilities
               SET usage_count = %(usage_count)s, success_count = %(success_count)s,
                   failure_count = %(failure_count)s, success_rate = %(success_rate)s,
                   avg_duration_ms = %(avg_duration_ms)s, last_used = now(),
                   updated_at = now(){extra}
             WHERE id = %(id)s
            RETURNING {SUMMARY_COLUMNS}
            """,
            params,
            returning=True,
        )
        return {str(row["id"]): row for row in _all_results(cur)}


def add_approval_tools(conn: Conn, *, tools_by_id: Mapping[str, Sequence[str]]) -> None:
    """Add tools whose calls needed approval to each capability's ``approval_tools`` (sorted,
    each once); in id order, so concurrent batches lock alike. A known tool writes nothing."""
    params = [
        {"id": capability_id, "tools": Jsonb(sorted(set(tools)))}
        for capability_id, tools in sorted(tools_by_id.items())
        if tools
    ]
    if not params:
        return
    with conn.cursor() as cur:
        cur.executemany(
            """
            UPDATE capabilities AS c
               SET approval_tools = (
                       SELECT jsonb_agg(t ORDER BY t)
                         FROM (SELECT jsonb_array_elements_text(c.approval_tools)
                               UNION SELECT jsonb_array_elements_text(%(tools)s)) AS x(t))
             WHERE c.id = %(id)s AND NOT c.approval_tools @> %(tools)s
            """,
            params,
        )


def insert_capabilities(conn: Conn, *, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
    """Insert new capabilities (used now); a (tenant, code hash) that exists is skipped.

    Each row holds tenant, hash, code, intent, vec, name, desc, schema and tools (jsonb
    wrapped), the ``STATS_FIELDS``, and version and family (1 and None: a family of its own);
    returns the inserted summaries with their keys.
    """
    if not rows:
        return []
    with conn.cursor() as cur:
        cur.executemany(
            f"""
            INSERT INTO capabilities (tenant_id, code_hash, code, intent, intent_embedding,
                                      name, description, parameters_schema, tools_used,
                                      usage_count, success_count, failure_count, success_rate,
                                      avg_duration_ms, last_used, version, family_id, language)
            VALUES (%(tenant)s, %(hash)s, %(code)s, %(intent)s, %(vec)s, %(name)s, %(desc)s,
                    %(schema)s, %(tools)s, %(usage_count)s, %(success_count)s,
                    %(failure_count)s, %(success_rate)s, %(avg_duration_ms)s, now(),
                    %(version)s, %(family)s, %(language)s)
            ON CONFLICT (tenant_id, code_hash) DO NOTHING
            RETURNING {SUMMARY_COLUMNS}, tenant_id, code_hash
            """,
            [{**r, "vec": np.asarray(r["vec"], dtype=np.float32)} for r in rows],
            returning=True,
        )
        return list(_all_results(cur))


def latest_named(
    conn: Conn, *, tenant_id: str, name: str, intent_embedding: Sequence[float]
) -> Row | None:
    """The latest version of the capability so named: its family, the family's highest
    version, its tools and the cosine ``similarity`` of its intent to ``intent_embedding``."""
    row: Row | None = conn.execute(
        """
        SELECT c.id::text AS id, coalesce(c.family_id, c.id)::text AS family, c.tools_used,
               (SELECT max(v.version) FROM capabilities AS v
                 WHERE v.tenant_id = c.tenant_id
                   AND coalesce(v.family_id, v.id) = coalesce(c.family_id, c.id)) AS top,
               coalesce(1 - (c.intent_embedding <=> %(q)s), 0) AS similarity
          FROM capabilities AS c
         WHERE c.tenant_id = %(tenant)s AND c.name = %(name)s
         ORDER BY c.version DESC, c.created_at DESC LIMIT 1
        """,
        {
            "tenant": tenant_id,
            "name": name,
            "q": np.asarray(intent_embedding, dtype=np.float32),
        },
    ).fetchone()
    return row


def family_heads(
    conn: Conn, *, tenant_id: str, tools_used: Sequence[str], language: str
) -> list[Row]:
    """The latest version of each of the tenant's capabilities in ``language`` calling exactly
    these tools (distinct, first-call order), oldest family first: candidates for a twin."""
    return conn.execute(
        """
        SELECT c.id::text AS id, c.name, c.code, coalesce(c.family_id, c.id)::text AS family,
               c.version AS top
          FROM capabilities AS c
         WHERE c.tenant_id = %s AND c.tools_used = %s::jsonb AND c.language = %s
           AND NOT EXISTS (SELECT 1 FROM capabilities AS n
                            WHERE n.tenant_id = c.tenant_id AND n.version > c.version
                              AND coalesce(n.family_id, n.id) = coalesce(c.family_id, c.id))
         ORDER BY c.created_at
        """,
        (tenant_id, Jsonb(list(tools_used)), language),
    ).fetchall()


# A new version answers to the phrasings of the one it replaces (which matching no longer sees).
_INHERIT_SQL = """
INSERT INTO capability_aliases (capability_id, tenant_id, intent, intent_embedding)
SELECT n.id, n.tenant_id, p.intent, p.intent_embedding
  FROM capabilities AS n,
       (SELECT intent, intent_embedding FROM capabilities
         WHERE id = %(old)s AND intent_embedding IS NOT NULL
        UNION ALL
        SELECT intent, intent_embedding FROM capability_aliases WHERE capability_id = %(old)s
       ) AS p
 WHERE n.id = %(new)s AND p.intent <> n.intent
ON CONFLICT (capability_id, intent) DO NOTHING
"""


def inherit_phrasings(conn: Conn, *, pairs: Sequence[tuple[str, str]]) -> None:
    """Give each (new version, version it replaces) pair's new row the old one's intent and
    aliases as aliases, in the caller's transaction."""
    if pairs:
        with conn.cursor() as cur:
            cur.executemany(_INHERIT_SQL, [{"new": new, "old": old} for new, old in pairs])


def taken_names(conn: Conn, *, wanted: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of these (tenant, name) pairs already name a capability."""
    rows = conn.execute(
        "SELECT tenant_id, name FROM capabilities "
        "WHERE (tenant_id, name) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
        ([t for t, _ in wanted], [n for _, n in wanted]),
    ).fetchall()
    return {(r["tenant_id"], r["name"]) for r in rows}


def promote(conn: Conn, *, min_usage: int, min_success_rate: float) -> int:
    """Set promoted_at on capabilities used at least ``min_usage`` times with a success rate
    above ``min_success_rate``; returns how many were promoted."""
    cur = conn.execute(
        """
        UPDATE capabilities SET promoted_at = now()
         WHERE promoted_at IS NULL AND usage_count >= %s AND success_rate > %s
        """,
        (min_usage, min_success_rate),
    )
    return cur.rowcount


# Emergent capabilities used at most once and untouched for %s days.
_IDLE = (
    "source = 'emergent' AND usage_count <= 1 "
    "AND coalesce(last_used, created_at) < now() - make_interval(days => %s)"
)


def count_idle(conn: Conn, *, idle_days: int) -> int:
    """How many emergent capabilities were used at most once and idle ``idle_days``."""
    row = conn.execute(
        f"SELECT count(*) AS n FROM capabilities WHERE {_IDLE}", (idle_days,)
    ).fetchone()
    return int(row["n"]) if row else 0


def delete_idle(conn: Conn, *, idle_days: int) -> list[str]:
    """Delete the capabilities ``count_idle`` counts; returns their ids."""
    rows = conn.execute(f"DELETE FROM capabilities WHERE {_IDLE} RETURNING id", (idle_days,))
    return [r["id"] for r in rows.fetchall()]


def set_graph_metrics(conn: Conn, *, rows: Sequence[tuple[str, float, int | None]]) -> None:
    """Store (id, PageRank, community) per capability; those left out fall back to neutral."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE capabilities SET pagerank = 0, community = NULL WHERE community IS NOT NULL"
        )
        if rows:
            cur.executemany(
                "UPDATE capabilities SET pagerank = %s, community = %s WHERE id::text = %s",
                [(pr, comm, cap_id) for cap_id, pr, comm in rows],
            )


def _all_results(cur: psycopg.Cursor[Any]) -> Iterator[Row]:
    """Every row of an ``executemany(..., returning=True)``, statement after statement."""
    while True:
        yield from cur.fetchall()
        if not cur.nextset():
            break


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
