"""L2, the capability cache (``capability_cache``), and the invalidation log: keyword-only SQL.

Reads never return an expired row (``expires_at > now()`` in the lookup itself); the beat
job deletes them. Every function runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

Conn = psycopg.Connection[Any]
Row = dict[str, Any]


def find_entry(conn: Conn, *, tenant_id: str, capability_id: str, params_hash: str) -> Row | None:
    """The live entry for these params (not yet counted: the hit is counted when recorded)."""
    row: Row | None = conn.execute(
        """
        SELECT id, result, stdout, tools_used, servers, generations, source_execution_id,
               created_at
          FROM capability_cache
         WHERE tenant_id = %s AND capability_id = %s AND params_hash = %s AND expires_at > now()
        """,
        (tenant_id, capability_id, params_hash),
    ).fetchone()
    return row


def put_entry(
    conn: Conn,
    *,
    tenant_id: str,
    capability_id: str,
    params_hash: str,
    result: Any,
    stdout: str,
    tools_used: Sequence[str],
    servers: Sequence[str],
    source_execution_id: str,
    ttl_s: int,
    generations: Mapping[str, int],
) -> int | None:
    """Insert or refresh the entry (one row per capability + params, however many runs race);
    its id, or None when the capability is gone."""
    row = conn.execute(
        """
        INSERT INTO capability_cache (tenant_id, capability_id, params_hash, result, stdout,
                                      tools_used, servers, generations, source_execution_id,
                                      expires_at)
        SELECT %(tenant)s, c.id, %(params)s, %(result)s, %(stdout)s, %(tools)s, %(servers)s,
               %(generations)s, %(source)s, now() + make_interval(secs => %(ttl)s)
          FROM capabilities c WHERE c.id = %(cap)s AND c.tenant_id = %(tenant)s
        ON CONFLICT (tenant_id, capability_id, params_hash) DO UPDATE SET
            result = EXCLUDED.result, stdout = EXCLUDED.stdout,
            tools_used = EXCLUDED.tools_used, servers = EXCLUDED.servers,
            generations = EXCLUDED.generations,
            source_execution_id = EXCLUDED.source_execution_id,
            created_at = now(), expires_at = EXCLUDED.expires_at
        RETURNING id
        """,
        {
            "tenant": tenant_id,
            "cap": capability_id,
            "params": params_hash,
            "result": Jsonb(result),
            "stdout": stdout.replace("\x00", "\ufffd"),
            "tools": list(tools_used),
            "servers": list(servers),
            "generations": Jsonb(dict(generations)),
            "source": source_execution_id,
            "ttl": ttl_s,
        },
    ).fetchone()
    return int(row["id"]) if row else None


def delete_entry(conn: Conn, *, entry_id: int) -> None:
    """Drop one entry (its run read a server that was written meanwhile)."""
    conn.execute("DELETE FROM capability_cache WHERE id = %s", (entry_id,))


def delete_entries(
    conn: Conn,
    *,
    tenant_id: str | None = None,
    capability_id: str | None = None,
    tools: Iterable[str] = (),
    servers: Iterable[str] = (),
    expired: bool = False,
) -> dict[str, int]:
    """Delete matching entries (every condition given must hold; tools/servers: any overlap);
    the count per tenant. No condition at all deletes nothing."""
    where: list[str] = []
    params: dict[str, Any] = {}
    if tenant_id is not None:
        where.append("tenant_id = %(tenant)s")
        params["tenant"] = tenant_id
    if capability_id is not None:
        where.append("capability_id = %(cap)s")
        params["cap"] = capability_id
    tools, servers = list(tools), list(servers)
    if tools:
        where.append("tools_used && %(tools)s")
        params["tools"] = tools
    if servers:
        where.append("servers && %(servers)s")
        params["servers"] = servers
    if expired:
        where.append("expires_at <= now()")
    if not where:
        return {}
    rows = conn.execute(
        "WITH gone AS (DELETE FROM capability_cache WHERE "
        + " AND ".join(where)
        + " RETURNING tenant_id) SELECT tenant_id, count(*) AS n FROM gone GROUP BY tenant_id",
        params,
    ).fetchall()
    return {r["tenant_id"]: int(r["n"]) for r in rows}


def find_by_intent(
    conn: Conn,
    *,
    tenant_id: str,
    embedding: np.ndarray,
    params_hash: str,
    min_similarity: float,
) -> Row | None:
    """L3: the live entry with these params whose capability's intent is closest to
    ``embedding``, if at least ``min_similarity`` (cosine) close."""
    row: Row | None = conn.execute(
        """
        SELECT cc.*, 1 - (c.intent_embedding <=> %(q)s) AS similarity
          FROM capability_cache cc JOIN capabilities c ON c.id = cc.capability_id
         WHERE cc.tenant_id = %(tenant)s AND cc.params_hash = %(params)s
           AND cc.expires_at > now() AND c.intent_embedding IS NOT NULL
           AND c.disabled_at IS NULL
         ORDER BY c.intent_embedding <=> %(q)s LIMIT 1
        """,
        {"tenant": tenant_id, "params": params_hash, "q": embedding},
    ).fetchone()
    if row is None or float(row["similarity"]) < min_similarity:
        return None
    return row


def log_invalidation(
    conn: Conn,
    *,
    tenant_id: str,
    trigger: str,
    scope: str,
    count: int,
    capability_id: str | None = None,
    tool_id: str | None = None,
) -> None:
    """One row of ``cache_invalidation_log``."""
    conn.execute(
        'INSERT INTO cache_invalidation_log (tenant_id, trigger, scope, "count", capability_id, '
        "tool_id) VALUES (%s, %s, %s, %s, %s, %s)",
        (tenant_id, trigger, scope, count, capability_id, tool_id),
    )


def entry_count(conn: Conn, *, tenant_id: str) -> int:
    """Live L2 entries of a tenant."""
    row = conn.execute(
        "SELECT count(*) AS n FROM capability_cache WHERE tenant_id = %s AND expires_at > now()",
        (tenant_id,),
    ).fetchone()
    return int(row["n"]) if row else 0


def invalidations_by_trigger(conn: Conn, *, tenant_id: str) -> dict[str, dict[str, int]]:
    """Per trigger: how many invalidations were logged and how many entries they removed."""
    rows = conn.execute(
        'SELECT trigger, count(*) AS events, COALESCE(sum("count"), 0) AS entries '
        "FROM cache_invalidation_log WHERE tenant_id = %s GROUP BY trigger ORDER BY trigger",
        (tenant_id,),
    ).fetchall()
    return {r["trigger"]: {"events": int(r["events"]), "entries": int(r["entries"])} for r in rows}


def latest_statuses(conn: Conn, *, capability_id: str, n: int) -> list[str]:
    """Statuses of the capability's ``n`` latest finished runs (cache hits are not runs)."""
    rows = conn.execute(
        """
        SELECT status FROM executions
         WHERE capability_id = %s AND finished_at IS NOT NULL AND NOT (extras ? 'cache_hit')
         ORDER BY finished_at DESC LIMIT %s
        """,
        (capability_id, n),
    ).fetchall()
    return [str(r["status"]) for r in rows]


def block_servers(conn: Conn, *, servers: Iterable[str], reason: str) -> None:
    """No cached result that used these servers is served until an invalidation of them
    completes (their last one failed halfway)."""
    conn.execute(
        "INSERT INTO cache_blocked_servers (server, reason) SELECT s, %s FROM unnest(%s::text[]) s "
        "ON CONFLICT (server) DO UPDATE SET reason = EXCLUDED.reason, blocked_at = now()",
        (reason, sorted(set(servers))),
    )


def unblock_servers(conn: Conn, *, servers: Iterable[str]) -> None:
    """Their invalidation completed: their entries may be served again."""
    conn.execute(
        "DELETE FROM cache_blocked_servers WHERE server = ANY(%s::text[])", (sorted(set(servers)),)
    )


def blocked_servers(conn: Conn) -> list[str]:
    """Servers whose invalidation is still owed (retried by the expiry beat job)."""
    rows = conn.execute("SELECT server FROM cache_blocked_servers ORDER BY server").fetchall()
    return [str(r["server"]) for r in rows]


def capability_facts(conn: Conn, *, tenant_id: str, capability_id: str) -> Row:
    """What the cache did for one capability: its runs (``POST …/execute``, finished) and how
    many of them a cached result answered; its live entries, the hits they served and when
    the first of them expires."""
    row: Row | None = conn.execute(
        """
        SELECT (SELECT count(*) FROM executions
                 WHERE capability_id = %(cap)s AND tenant_id = %(tenant)s
                   AND finished_at IS NOT NULL) AS runs,
               (SELECT count(*) FROM executions
                 WHERE capability_id = %(cap)s AND tenant_id = %(tenant)s
                   AND finished_at IS NOT NULL AND extras ? 'cache_hit') AS hits,
               count(c.id) AS entries,
               COALESCE(sum(c.hit_count), 0) AS entry_hits,
               min(c.expires_at) AS next_expiry
          FROM capability_cache c
         WHERE c.capability_id = %(cap)s AND c.tenant_id = %(tenant)s AND c.expires_at > now()
        """,
        {"cap": capability_id, "tenant": tenant_id},
    ).fetchone()
    assert row is not None  # an aggregate always has its one row
    return row
