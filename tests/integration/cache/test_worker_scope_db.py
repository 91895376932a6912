"""The sandbox worker reads `tools` once per run (``run_tools``) for both its tool scope and
its cache settings: on real Postgres, what it derives equals the two reads it replaced, so
its cache keys equal the gateway's (``load_scope``) and removed servers stay out of scope."""

from __future__ import annotations

import pytest

from shared.cache.runs import load_scope, scope_among
from shared.db import connect
from shared.tools.store import configured, list_tools, run_tools, upsert_tool

pytestmark = pytest.mark.integration

SERVERS = {"live": "ready", "gone": "removed"}  # and `loose`: a server without a row


def _seed(pg_url: str) -> None:
    with connect(pg_url) as conn:
        for name, state in SERVERS.items():
            conn.execute(
                "INSERT INTO mcp_servers (name, transport, state) VALUES (%s, 'stdio', %s)",
                (name, state),
            )
        for server, tool, read_only in [
            ("live", "read", True), ("live", "write", False), ("gone", "read", True),
            ("loose", "read", True),
        ]:  # fmt: skip
            upsert_tool(
                conn, tool_id=f"{server}:{tool}", server=server, name=tool, description=tool,
                input_schema={"type": "object"}, schema_hash=f"hash-{server}-{tool}",
                embedding=None, annotations={"readOnlyHint": read_only},
                cache_override={"ttl_s": 5} if tool == "write" else None,
            )  # fmt: skip
        conn.commit()


@pytest.mark.parametrize(
    "tools",
    [None, ["live:read", "gone:read"], ["live:write", "loose:read", "nowhere:x"], []],
    ids=["every-tool", "with-a-removed-server", "with-an-unknown-id", "none"],
)
def test_one_read_gives_the_gateways_cache_scope(pg_url: str, tools: list[str] | None) -> None:
    _seed(pg_url)
    with connect(pg_url) as conn:
        known = run_tools(conn)
        gateway = load_scope(conn, tools=tools)
    worker = scope_among(known, tools=tools)
    assert worker == gateway  # same policies, same digest: the same cache keys
    if tools is None:
        assert "gone:read" in worker.policies  # cache settings include removed servers' tools


def test_one_read_gives_the_tool_scope_without_removed_servers(pg_url: str) -> None:
    _seed(pg_url)
    with connect(pg_url) as conn:
        known = run_tools(conn)
        listed = list_tools(conn)
    scope = [{k: v for k, v in r.items() if k != "schema_hash"} for r in configured(known)]
    assert scope == listed
    assert [r["id"] for r in scope] == ["live:read", "live:write", "loose:read"]
