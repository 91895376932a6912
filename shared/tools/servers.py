"""Rows of ``mcp_servers`` and ``toolhost_servers``: each replica's view, and their aggregate.

Every toolhost replica writes its own row per server (``replica`` = its heartbeat identity
``<hostname>:<pid>``). ``mcp_servers.state`` is derived from the rows of live replicas:
ready when any has the server ready, so one replica's crashed stdio server does not
mark the tools unavailable for all; a tool is unavailable only when no live replica has
its server ready. Liveness is the heartbeat's: a row counts while its replica beats, and
for ``DEAD_AFTER_S`` after it was written (a replica writes its first row right after its
first beat, and a writer reads the heartbeats just before). Rows of dead replicas are
deleted by the next writer or by the periodic ``prune_dead_replicas``.

Every change is one transaction under the server's advisory lock (the one tool sync
takes), so two replicas writing at once cannot each miss the other's row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from shared.rpc.heartbeat import HEARTBEAT_TTL_S
from shared.server_states import RANK, ServerState
from shared.tools import apps
from shared.tools import store as tools_store

Conn = psycopg.Connection[Any]

DEAD_AFTER_S = HEARTBEAT_TTL_S
NO_REPLICA_REASON = "no live toolhost replica serves it"
REMOVED_STATE = ServerState.REMOVED.value
REMOVED_REASON = "no longer in the MCP configuration (removed or disabled)"

# A row counts while its replica beats, and for DEAD_AFTER_S after it was written; the
# parameters are ``_live_params(live)``.
_LIVE_ROW = "(replica = ANY(%s) OR updated_at >= now() - make_interval(secs => %s))"


def server_lock(conn: Conn, server: str) -> None:
    """The per-server transaction lock shared by tool sync and state writes."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agentcards:tools:{server}",))


def aggregate(rows: Sequence[dict[str, Any]]) -> tuple[str, str | None]:
    """The server's state and last error from its live replicas' rows.

    Ready anywhere is ready (calls are routed to that replica); otherwise the best state
    seen, with the newest error; no row at all is ``down``: nobody serves it.
    """
    if not rows:
        return ServerState.DOWN.value, NO_REPLICA_REASON
    best = min(rows, key=lambda r: (RANK.get(r["state"], len(RANK)), -r["updated_at"]))
    if best["state"] == ServerState.READY:
        return ServerState.READY.value, None
    errors = sorted((r for r in rows if r["last_error"]), key=lambda r: r["updated_at"])
    return best["state"], errors[-1]["last_error"] if errors else None


def _live_params(live: Collection[str]) -> tuple[list[str], float]:
    return list(live), DEAD_AFTER_S


def record_replica_state(
    conn: Conn,
    *,
    replica: str,
    server: str,
    transport: str,
    config: dict[str, Any],
    state: str,
    last_error: str | None,
    live: Collection[str],
) -> str:
    """Write ``replica``'s state of ``server`` and re-derive the server's; returns the aggregate.

    ``live`` is the replicas with a heartbeat now (``replica`` itself counts regardless).
    """
    with conn.transaction():
        server_lock(conn, server)
        conn.execute(
            """
            INSERT INTO mcp_servers (name, transport, config, state, last_error, updated_at)
            VALUES (%s, %s, %s, %s, %s, now())
            ON CONFLICT (name) DO UPDATE SET
                transport = EXCLUDED.transport, config = EXCLUDED.config, updated_at = now(),
                -- configured again on this replica: no longer removed
                state = CASE WHEN mcp_servers.state = %s THEN EXCLUDED.state
                             ELSE mcp_servers.state END
            """,
            (server, transport, Jsonb(config), state, last_error, REMOVED_STATE),
        )
        conn.execute(
            """
            INSERT INTO toolhost_servers (replica, server, state, last_error, updated_at)
            VALUES (%s, %s, %s, %s, now())
            ON CONFLICT (server, replica) DO UPDATE SET
                state = EXCLUDED.state, last_error = EXCLUDED.last_error, updated_at = now()
            """,
            (replica, server, state, last_error),
        )
        return _rederive(conn, server=server, live=[*live, replica])


def forget_replica(conn: Conn, *, replica: str, live: Collection[str]) -> list[str]:
    """A replica that stops deletes its rows; returns the servers whose state it changed."""
    servers = conn.execute(
        "SELECT server FROM toolhost_servers WHERE replica = %s ORDER BY server", (replica,)
    ).fetchall()
    others = [r for r in live if r != replica]
    return [
        s["server"]
        for s in servers
        if _drop(conn, server=s["server"], live=others, replica=replica)
    ]


def forget_server(conn: Conn, *, replica: str, server: str, live: Collection[str]) -> bool:
    """A replica that stops serving ``server`` (it left its config) deletes its row; True if
    the server's state changed."""
    return _drop(conn, server=server, live=[r for r in live if r != replica], replica=replica)


def prune_dead_replicas(conn: Conn, *, live: Collection[str]) -> list[str]:
    """Rows of replicas without a heartbeat (SIGKILLed, host lost) stop counting; returns the
    servers whose state changed."""
    servers = conn.execute(
        f"SELECT DISTINCT server FROM toolhost_servers WHERE NOT {_LIVE_ROW} ORDER BY server",
        _live_params(live),
    ).fetchall()
    return [s["server"] for s in servers if _drop(conn, server=s["server"], live=list(live))]


def _drop(conn: Conn, *, server: str, live: list[str], replica: str | None = None) -> bool:
    """Delete ``replica``'s row (if given) and dead replicas' rows; True if the state changed."""
    with conn.transaction():
        server_lock(conn, server)
        if replica is not None:
            conn.execute(
                "DELETE FROM toolhost_servers WHERE server = %s AND replica = %s", (server, replica)
            )
        before = conn.execute("SELECT state FROM mcp_servers WHERE name = %s", (server,)).fetchone()
        after = _rederive(conn, server=server, live=live)
    return before is None or before["state"] != after


def _rederive(conn: Conn, *, server: str, live: list[str]) -> str:
    """Delete dead replicas' rows, then set the server's state, error, tool availability and
    count from the rest (a ``removed`` server stays removed)."""
    conn.execute(
        f"DELETE FROM toolhost_servers WHERE server = %s AND NOT {_LIVE_ROW}",
        (server, *_live_params(live)),
    )
    rows = conn.execute(
        "SELECT state, last_error, extract(epoch FROM updated_at) AS updated_at "
        "FROM toolhost_servers WHERE server = %s",
        (server,),
    ).fetchall()
    state, last_error = aggregate(rows)
    conn.execute(
        "UPDATE mcp_servers SET state = %s, last_error = %s, updated_at = now() "
        "WHERE name = %s AND state <> %s",
        (state, last_error, server, REMOVED_STATE),
    )
    if state != "ready":
        tools_store.mark_server_unavailable(conn, server=server)
    conn.execute(
        "UPDATE mcp_servers SET tool_count = "
        "(SELECT count(*) FROM tools WHERE server = %s AND available) WHERE name = %s",
        (server, server),
    )
    return state


def mark_removed_servers(
    conn: Conn, *, configured: Collection[str], live: Collection[str]
) -> list[str]:
    """Servers that no replica configures any more become ``removed``, their tools unavailable.

    A server this replica does not configure stays when another live replica (``live``,
    by heartbeat) serves it: hosts may run different MCP configs, and one host starting
    without a server must not take it from the others.

    Rows are kept, not deleted: executions, edges and capabilities refer to the ids, and a
    server that comes back is upserted to ``connecting`` and its tools to available again.
    """
    with conn.transaction():
        served = conn.execute(
            f"SELECT DISTINCT server FROM toolhost_servers WHERE {_LIVE_ROW}", _live_params(live)
        ).fetchall()
        names = sorted({*configured, *(row["server"] for row in served)})
        removed = conn.execute(
            """
            UPDATE mcp_servers SET state = %(state)s, last_error = %(reason)s, tool_count = 0,
                   updated_at = now()
             WHERE NOT (name = ANY(%(names)s)) AND state <> %(state)s
            RETURNING name
            """,
            {"state": REMOVED_STATE, "reason": REMOVED_REASON, "names": names},
        ).fetchall()
        tools_store.mark_unavailable_except(conn, servers=names)
        conn.execute("DELETE FROM toolhost_servers WHERE NOT (server = ANY(%s))", (names,))
    return sorted(row["name"] for row in removed)


def record_server_info(conn: Conn, *, server: str, info: dict[str, Any]) -> None:
    """Keep what ``server`` answered to ``initialize`` (``protocolVersion``, ``serverInfo``,
    ``instructions``, ``capabilities``) and its tools' Apps ``_meta`` (``toolsUi``, see
    ``record_tools_ui``): the last replica to connect wins."""
    conn.execute("UPDATE mcp_servers SET server_info = %s WHERE name = %s", (Jsonb(info), server))


def record_tools_ui(conn: Conn, *, server: str, tools_ui: dict[str, Any]) -> None:
    """Keep the Apps part of each of ``server``'s tools' ``_meta`` (tool name -> its ``ui``)
    beside its handshake answer: the tools table has no column for a tool's ``_meta``, and
    only MCP Apps clients are shown it (``shared.tools.apps``)."""
    conn.execute(
        "UPDATE mcp_servers SET server_info = COALESCE(server_info, '{}'::jsonb) "
        "|| jsonb_build_object('toolsUi', %s::jsonb) WHERE name = %s",
        (Jsonb(tools_ui), server),
    )


def tools_ui(conn: Conn) -> dict[str, dict[str, Any]]:
    """Per server, the Apps ``_meta`` of its tools that have a UI (servers without: absent)."""
    rows = conn.execute(
        "SELECT name, server_info -> 'toolsUi' AS ui FROM mcp_servers "
        "WHERE server_info -> 'toolsUi' <> '{}'::jsonb"
    ).fetchall()
    return {row["name"]: row["ui"] for row in rows}


def server_info(conn: Conn, *, server: str) -> dict[str, Any] | None:
    """What ``server`` answered to its last ``initialize`` (None: never connected)."""
    row = conn.execute("SELECT server_info FROM mcp_servers WHERE name = %s", (server,)).fetchone()
    return row["server_info"] if row else None


def list_servers(conn: Conn) -> list[dict[str, Any]]:
    """Every known server with its aggregate state and each replica's own (``replicas``), and
    the MCP protocol revision it negotiated with the toolhost (``protocol_version``) and, for
    a server that cannot hold that revision for everything, the one it is also spoken to at,
    for what and why (``protocol_fallback``, null otherwise); ``apps``: whether it offers MCP
    Apps (``apps.offers_apps``, in SQL)."""
    return conn.execute(
        """
        SELECT m.name, m.transport, m.state, m.last_error, m.tool_count, m.updated_at,
               m.server_info ->> 'protocolVersion' AS protocol_version,
               m.server_info -> 'fallback' AS protocol_fallback,
               COALESCE(m.server_info -> 'capabilities' -> 'extensions' ? %(apps)s
                        OR m.server_info -> 'toolsUi' <> '{}'::jsonb, false) AS apps,
               COALESCE(
                   (SELECT jsonb_agg(jsonb_build_object(
                               'replica', r.replica, 'state', r.state,
                               'last_error', r.last_error, 'updated_at', r.updated_at)
                           ORDER BY r.replica)
                      FROM toolhost_servers r WHERE r.server = m.name),
                   '[]'::jsonb) AS replicas
          FROM mcp_servers m ORDER BY m.name
        """,
        {"apps": apps.EXTENSION_ID},
    ).fetchall()
