"""The tools' rows a run and a cache lookup read are kept in each process under
``tools_state.version`` (migration 0027): on real Postgres, every change to what they read
moves the version in its own transaction, so the copy in memory is never served after a
change, and a sync that rewrites unchanged tools keeps it (the copy stays useful)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from shared.cache.policy import ToolPolicy
from shared.cache.runs import load_scope
from shared.db import connect
from shared.executions.store import claim_execution
from shared.tools.store import run_tools, run_tools_at, tools_version, upsert_tool
from shared.tools.watch import APPLICATION_NAME, RETRY_S, ToolsWatch

pytestmark = pytest.mark.integration

Conn = Any


def _tool(conn: Conn, tool: str, **changes: Any) -> None:
    fields: dict[str, Any] = {
        "tool_id": f"live:{tool}", "server": "live", "name": tool, "description": tool,
        "input_schema": {"type": "object"}, "schema_hash": f"hash-{tool}", "embedding": None,
        "annotations": {"readOnlyHint": True}, "cache_override": None,
    }  # fmt: skip
    upsert_tool(conn, **(fields | changes))


def _seed(pg_url: str) -> None:
    with connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO mcp_servers (name, transport, state) VALUES ('live', 'stdio', 'ready')"
        )
        _tool(conn, "read")
        _tool(conn, "write", annotations={"readOnlyHint": False})
        conn.commit()


def _policy(pg_url: str, tool_id: str) -> ToolPolicy | None:
    """What the gateway's cache lookup decides with now (its scope, from the copy)."""
    with connect(pg_url) as conn:
        return load_scope(conn, tools=None).policies.get(tool_id)


CHANGES: dict[str, Callable[[Conn], None]] = {
    "cache override": lambda c: _tool(c, "read", cache_override={"ttl_s": 0}),
    "annotations": lambda c: _tool(c, "read", annotations={"readOnlyHint": False}),
    "schema": lambda c: _tool(c, "read", schema_hash="hash-2", input_schema={"type": "null"}),
    "description": lambda c: _tool(c, "read", description="reads something else"),
    "tool added": lambda c: _tool(c, "new"),
    "tool deleted": lambda c: c.execute("DELETE FROM tools WHERE id = 'live:write'"),
    "server removed": lambda c: c.execute("UPDATE mcp_servers SET state = 'removed'"),
    "server row gone": lambda c: c.execute("DELETE FROM mcp_servers"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_is_never_served_from_the_copy(pg_url: str, change: str) -> None:
    _seed(pg_url)
    before = _policy(pg_url, "live:read")  # the copy is loaded (and is current)
    with connect(pg_url) as conn:
        version = tools_version(conn)
        assert run_tools_at(conn, version=version) == run_tools(conn)
        CHANGES[change](conn)
        conn.commit()
        moved = tools_version(conn)
        assert moved != version
        # As the worker reads it: the version, then the rows as of it.
        assert run_tools_at(conn, version=moved) == run_tools(conn)
    after = _policy(pg_url, "live:read")
    if change == "cache override":
        assert before is not None and after is not None and after.ttl_s == 0 != before.ttl_s
    if change == "annotations":
        assert before is not None and after is not None
        assert before.read_only and not after.read_only


def test_a_rewrite_that_changes_nothing_keeps_the_version(pg_url: str) -> None:
    _seed(pg_url)
    with connect(pg_url) as conn:
        version = tools_version(conn)
        _tool(conn, "read")  # a toolhost sync of an unchanged tool
        conn.execute("UPDATE mcp_servers SET updated_at = now(), tool_count = 2")
        conn.commit()
        assert tools_version(conn) == version


def test_the_claim_reads_the_current_version(pg_url: str) -> None:
    """The sandbox worker's claim returns the version in its own statement."""
    _seed(pg_url)
    with connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO executions (id, tenant_id, code, status, timeout_s) "
            "VALUES (gen_random_uuid(), 'default', 'return 1', 'queued', 5)"
        )
        _tool(conn, "read", cache_override={"ttl_s": 1})
        conn.commit()
        found = conn.execute("SELECT id::text AS id FROM executions").fetchone()
        assert found is not None
        row = claim_execution(conn, execution_id=found["id"], worker="w")
        assert row is not None and row["tools_version"] == tools_version(conn)


async def _until(predicate: Callable[[], bool], *, what: str, timeout_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.01)


async def test_the_watch_hears_every_change_and_says_nothing_while_it_cannot(
    pg_url: str,
) -> None:
    """A gateway finds a direct call's tool under the version its watch heard (no read per
    call): every change must reach the watch, and while its connection is down it must say
    nothing (the caller then reads the version) rather than the version it heard last."""
    _seed(pg_url)
    watch = ToolsWatch(pg_url)
    listening = asyncio.create_task(watch.run())

    def current() -> Any:
        with connect(pg_url) as conn:
            return tools_version(conn)

    def heard(version: Any) -> Callable[[], bool]:
        return lambda: watch.heard is not None and watch.heard[1] == version

    try:
        await _until(heard(current()), what="the watch hears the version", timeout_s=10)
        for name, change in CHANGES.items():
            with connect(pg_url) as conn:
                change(conn)
                conn.commit()
            await _until(heard(current()), what=f"the watch hears: {name}", timeout_s=5)
        with connect(pg_url) as conn:  # its connection dies (say Postgres restarted)
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND datname = current_database()",
                (APPLICATION_NAME,),
            )
            _tool(conn, "after", description="added while nobody listened")
            conn.commit()
        await _until(lambda: watch.heard is None, what="the watch falls silent", timeout_s=5)
        # Listening again, it reads the version that moved while it could not hear.
        await _until(heard(current()), what="the watch hears again", timeout_s=RETRY_S + 10)
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
