"""The toolhost as a process: real MCP servers over stdio, real Redis channel, real Postgres."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from services.toolhost.sync import schema_hash
from shared.config import Settings
from shared.db import connect
from shared.errors import ErrorType
from shared.queues import RPC_REQUESTS, TOOLS_CHANGED_CHANNEL, rpc_reply_key
from shared.rpc.client import RpcClient
from shared.rpc.events import ToolSchemaChanged
from shared.rpc.protocol import RpcReply, decode_reply
from tests.harness import spawn
from tests.integration.mcp_servers import (
    ToolhostProcess,
    example_server,
    grant,
    memory_server,
    time_server,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

Start = Callable[..., ToolhostProcess]


@pytest.fixture(autouse=True)
def _granted(settings: Settings) -> None:
    """Toolhosts serve only granted executions: grant every tool to the calls made here."""
    grant(settings.redis_url or "", "test")


async def call(
    client: RpcClient, tool: str, args: dict[str, Any] | None = None, *, timeout_s: float = 20
) -> RpcReply:
    return await client.call(
        execution_id="test", tool=tool, args=args or {}, deadline=time.time() + timeout_s
    )


def rows(url: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with connect(url) as conn:
        return conn.execute(sql, params).fetchall()


async def test_real_servers_synced_and_called(
    settings: Settings, tmp_path: Path, toolhost: Start, memory_server_bin: Path
) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        {
            "example": example_server(tmp_path),
            "time": time_server(),
            "memory": memory_server(memory_server_bin, tmp_path),
        },
    )
    beat = toolhost(config).wait_ready()
    assert beat["servers"] == {"example": "ready", "time": "ready", "memory": "ready"}
    db = settings.database_url or ""

    # Tools are in Postgres with schema, canonical hash and a 384-d embedding.
    tools = {r["id"]: r for r in rows(db, "SELECT * FROM tools")}
    for tool_id in ["example:add", "example:read_file", "time:get_current_time",
                    "time:convert_time", "memory:create_entities", "memory:read_graph"]:  # fmt: skip
        assert tool_id in tools, sorted(tools)
        row = tools[tool_id]
        assert row["available"] is True
        assert row["embedding"] is not None
        assert len(row["embedding"].to_list()) == settings.vector_dim
        canonical = json.dumps(
            row["input_schema"], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        assert row["schema_hash"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert "a" in tools["example:add"]["input_schema"]["properties"]
    servers = {r["name"]: r for r in rows(db, "SELECT * FROM mcp_servers")}
    assert servers["memory"]["state"] == "ready"
    assert servers["memory"]["transport"] == "stdio"
    assert servers["memory"]["config"]["env"] == {"MEMORY_FILE_PATH": "***"}  # secrets redacted
    assert servers["example"]["tool_count"] == sum(t["server"] == "example" for t in tools.values())

    async with RpcClient(settings.redis_url or "") as client:
        # The project's example server.
        added = await call(client, "example:add", {"a": 2, "b": 3})
        assert added.ok and added.result == 5
        text = await call(client, "example:read_file", {"name": "welcome.txt"})
        assert text.ok and "AgentCards example server" in text.result
        note = await call(client, "example:add_note", {"title": "t", "body": "b"})
        assert note.ok and note.result == {"id": 1, "title": "t", "body": "b"}

        # mcp-server-time (PyPI).
        now = await call(client, "time:get_current_time", {"timezone": "UTC"})
        assert now.ok and now.result["timezone"] == "UTC", now
        converted = await call(
            client,
            "time:convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.ok and converted.result["target"]["datetime"].endswith("21:00:00+09:00")

        # @modelcontextprotocol/server-memory (npm).
        created = await call(
            client,
            "memory:create_entities",
            {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote code"]}]},
        )
        assert created.ok, created
        graph = await call(client, "memory:read_graph")
        assert graph.ok, graph
        assert [e["name"] for e in graph.result["entities"]] == ["Ada"]

        # Distinct error types.
        divided = await call(client, "example:divide", {"a": 1, "b": 0})
        assert not divided.ok and divided.error
        assert (
            divided.error.type == ErrorType.TOOL_ERROR
            and "division by zero" in divided.error.message
        )
        bad_time = await call(client, "time:get_current_time", {"timezone": "Mars/Olympus"})
        assert bad_time.error and bad_time.error.type == ErrorType.TOOL_ERROR
        missing = await call(client, "example:no_such_tool")
        assert missing.error and missing.error.type == ErrorType.UNKNOWN_TOOL
        nowhere = await call(client, "nowhere:add")
        assert nowhere.error and nowhere.error.type == ErrorType.UNKNOWN_TOOL


async def test_hung_tool_times_out_and_toolhost_keeps_serving(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    async with RpcClient(settings.redis_url or "") as client:
        hung = asyncio.create_task(call(client, "example:slow", {"seconds": 60}, timeout_s=1.0))
        # While one call hangs, others are served.
        quick = await call(client, "example:multiply", {"a": 6, "b": 7})
        assert quick.ok and quick.result == 42
        reply = await hung
        assert reply.error and reply.error.type == ErrorType.TIMEOUT, reply
        # The toolhost's own reply at the deadline, not the 60 s sleep nor a lost reply.
        assert "did not answer" in reply.error.message
        after = await call(client, "example:add", {"a": 1, "b": 1})
        assert after.ok and after.result == 2


async def test_expired_and_out_of_scope_requests_are_not_run(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    r = redis.Redis.from_url(settings.redis_url or "")

    def push_raw(**fields: Any) -> RpcReply:
        call_id = uuid.uuid4().hex
        request = {"v": 1, "call_id": call_id, "execution_id": "e", "args": {}} | fields
        r.lpush(RPC_REQUESTS, orjson.dumps(request))
        popped = r.blpop([rpc_reply_key(call_id)], timeout=10)
        assert popped is not None
        assert r.ttl(rpc_reply_key(call_id)) == -2  # popped; an unread one would expire
        return decode_reply(popped[1])

    expired = push_raw(
        tool="example:add_note", args={"title": "x", "body": "y"}, deadline=time.time() - 1
    )
    assert expired.error and expired.error.type == ErrorType.TIMEOUT
    # The bridge checks scope; the toolhost checks again.
    denied = push_raw(
        tool="example:add_note",
        args={"title": "x", "body": "y"},
        deadline=time.time() + 10,
        allowed=["example:list_notes"],
    )
    assert denied.error and denied.error.type == ErrorType.TOOL_NOT_ALLOWED
    invalid = push_raw(tool="not a tool id", deadline=time.time() + 10)
    assert invalid.error and invalid.error.type == ErrorType.INVALID_REQUEST
    async with RpcClient(settings.redis_url or "") as client:
        listed = await call(client, "example:list_notes")
    assert listed.ok and listed.result == []  # neither add_note ran


async def test_server_crash_mid_call_then_reconnect(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    db = settings.database_url or ""
    async with RpcClient(settings.redis_url or "") as client:
        crashed = await call(client, "example:crash")
        assert crashed.error and crashed.error.type == ErrorType.SERVER_UNAVAILABLE, crashed
        # Meanwhile its tools are unavailable (and calls say so) ...
        wait_for(
            lambda: rows(db, "SELECT 1 FROM tools WHERE id = 'example:add' AND NOT available"),
            what="example:add marked unavailable",
        )
        # ... until the toolhost has restarted the server.
        wait_for(
            lambda: rows(
                db,
                "SELECT 1 FROM mcp_servers m JOIN tools t ON t.server = m.name "
                "WHERE m.name = 'example' AND m.state = 'ready' AND t.id = 'example:add' "
                "AND t.available",
            ),
            what="example reconnected",
        )
        again = await call(client, "example:add", {"a": 20, "b": 22})
        assert again.ok and again.result == 42


async def test_unstartable_server_is_retrying_and_others_serve(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    config = {"example": example_server(tmp_path), "ghost": {"command": "/nonexistent/mcp"}}
    host = toolhost(write_config(tmp_path / "mcp.json", config))
    servers = (host.heartbeat() or {})["servers"]
    # It keeps retrying with backoff: `retrying` through the waits and the attempts alike.
    assert servers["example"] == "ready" and servers["ghost"] == "retrying"
    ghost = rows(settings.database_url or "", "SELECT * FROM mcp_servers WHERE name = 'ghost'")
    assert ghost[0]["state"] == "retrying"
    assert "nonexistent" in ghost[0]["last_error"]
    async with RpcClient(settings.redis_url or "") as client:
        down = await call(client, "ghost:anything")
        assert down.error and down.error.type == ErrorType.SERVER_UNAVAILABLE
        assert "ghost" in down.error.message
        up = await call(client, "example:add", {"a": 1, "b": 2})
        assert up.ok and up.result == 3
    assert host.stop() == 0  # SIGTERM: drained and closed cleanly
    assert host.heartbeat() is None  # the replica took its heartbeat with it


async def test_tool_list_changed_resyncs(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    db = settings.database_url or ""
    async with RpcClient(settings.redis_url or "") as client:
        missing = await call(client, "example:extra", {"text": "hi"})
        assert missing.error and missing.error.type == ErrorType.UNKNOWN_TOOL
        assert (await call(client, "example:add_extra_tool")).ok
        wait_for(lambda: rows(db, "SELECT 1 FROM tools WHERE id = 'example:extra'"), what="sync")
        echoed = await call(client, "example:extra", {"text": "hi"})
        assert echoed.ok and echoed.result == "hi"


def test_changed_schema_is_published(settings: Settings, tmp_path: Path, toolhost: Start) -> None:
    db = settings.database_url or ""
    with connect(db) as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, description, input_schema, schema_hash) "
            "VALUES ('example:add', 'example', 'add', 'old', '{}', %s), "
            "('example:retired', 'example', 'retired', 'gone', '{}', %s)",
            (schema_hash({}), schema_hash({})),
        )
        conn.commit()
    pubsub = redis.Redis.from_url(settings.redis_url or "").pubsub()
    pubsub.subscribe(TOOLS_CHANGED_CHANNEL)
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    events: dict[str, ToolSchemaChanged] = {}
    deadline = time.monotonic() + 10
    while len(events) < 2 and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=1)
        if message and message["type"] == "message":
            event = ToolSchemaChanged.decode(message["data"])
            events[event.tool_id] = event
    assert set(events) == {"example:add", "example:retired"}
    added = rows(db, "SELECT schema_hash FROM tools WHERE id = 'example:add'")[0]
    assert events["example:add"].old_hash == schema_hash({})
    assert events["example:add"].new_hash == added["schema_hash"] != schema_hash({})
    assert events["example:retired"].new_hash is None  # vanished from the server's list
    assert rows(db, "SELECT 1 FROM tools WHERE id = 'example:retired'") == []


async def test_two_replicas_compete_and_each_call_runs_once(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    # Each replica runs its own copy of the example server with its own notes folder, so
    # the notes on disk show which replica ran which call.
    hosts = []
    for i in range(2):
        folder = tmp_path / f"replica{i}"
        folder.mkdir()
        config = write_config(folder / "mcp.json", {"example": example_server(folder)})
        hosts.append(toolhost(config, wait=False))
    for host in hosts:
        host.wait_ready()
    n = 40
    async with RpcClient(settings.redis_url or "") as client:
        replies = await asyncio.gather(
            *(call(client, "example:add_note", {"title": f"n{i}", "body": ""}) for i in range(n))
        )
    assert all(r.ok for r in replies), [r.error for r in replies if not r.ok]
    counts = []
    for i in range(2):
        path = tmp_path / f"replica{i}" / "notes" / "notes.json"
        counts.append(len(json.loads(path.read_text())) if path.exists() else 0)
    assert sum(counts) == n  # every call ran exactly once across both replicas
    assert all(c > 0 for c in counts), counts  # and both replicas took work


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"mcpServers": {"broken": {"args": ["x"]}}}', "server 'broken': missing 'command'"),
        ('{"mcpServers": {', "is not valid JSON"),
        ('{"mcpServers": {"s": {"command": "x", "comand": "y"}}}', "unknown key 'comand'"),
    ],
)
def test_bad_config_fails_clearly(
    settings: Settings, tmp_path: Path, toolhost: Start, content: str, message: str
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(content)
    host = toolhost(config, wait=False)
    assert host.proc.wait(30) == 2
    assert "config_error" in host.log() and message in host.log(), host.log()


async def test_streamable_http_server(settings: Settings, tmp_path: Path, toolhost: Start) -> None:
    import subprocess
    import sys

    from deploy.launcher.embedded import free_port
    from tests.integration.mcp_servers import REPO

    port = free_port()
    server = spawn(  # stopped at exit, and dies with pytest, if the test is cut short
        [sys.executable, "-m", "deploy.examples.example_server", "--http", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        config = {"example": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Test": "1"}}}
        # The toolhost starts at once; it retries with backoff until the server listens.
        host = toolhost(write_config(tmp_path / "mcp.json", config), wait=False)
        wait_for(lambda: (host.heartbeat() or {}).get("servers") == {"example": "ready"},
                 what="HTTP server connected")  # fmt: skip
        async with RpcClient(settings.redis_url or "") as client:
            reply = await call(client, "example:list_files")
        assert reply.ok and reply.result == ["cities.txt", "recipes.md", "welcome.txt"]
        row = rows(settings.database_url or "", "SELECT * FROM mcp_servers")[0]
        assert row["transport"] == "http" and row["config"]["headers"] == {"X-Test": "***"}
    finally:
        server.terminate()
        server.wait(10)
