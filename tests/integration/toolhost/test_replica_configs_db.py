"""Hosts may run different MCP configs: a server leaves only when no live replica serves it."""

from __future__ import annotations

from shared.db import connect
from shared.tools.servers import mark_removed_servers, record_replica_state

A, B = "host-a:101", "host-b:202"


def _serve(url: str, *, replica: str, server: str) -> None:
    with connect(url) as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, schema_hash) VALUES (%s, %s, 'add', 'h')",
            (f"{server}:add", server),
        )
        record_replica_state(
            conn, replica=replica, server=server, transport="stdio", config={},
            state="ready", last_error=None, live=[replica],
        )  # fmt: skip
        conn.commit()


def _state(url: str, server: str) -> tuple[str, bool]:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT s.state, t.available FROM mcp_servers s JOIN tools t ON t.server = s.name "
            "WHERE s.name = %s",
            (server,),
        ).fetchone()
    assert row is not None
    return row["state"], row["available"]


def test_a_host_without_a_server_does_not_remove_it_while_another_serves_it(pg_url: str) -> None:
    _serve(pg_url, replica=A, server="notes")
    with connect(pg_url) as conn:  # host B starts with a config that has no "notes"
        removed = mark_removed_servers(conn=conn, configured=["weather"], live=[A, B])
        conn.commit()
    assert removed == []
    assert _state(pg_url, "notes") == ("ready", True)


def test_a_server_no_live_replica_configures_is_removed(pg_url: str) -> None:
    _serve(pg_url, replica=A, server="notes")
    with connect(pg_url) as conn:
        # A is gone (no heartbeat, its row older than a heartbeat's life): nobody serves it.
        conn.execute("UPDATE toolhost_servers SET updated_at = now() - interval '1 minute'")
        removed = mark_removed_servers(conn=conn, configured=["weather"], live=[B])
        conn.commit()
    assert removed == ["notes"]
    assert _state(pg_url, "notes") == ("removed", False)
