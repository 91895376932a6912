"""Two toolhost replicas serving the same stdio server: one replica's crash is not everybody's.

Each replica runs its own copy of the example server, with its own notes folder (so the
notes on disk show which replica ran a call), wrapped so that a ``hold`` file in that
folder keeps it from starting: killing a replica's server child while the file exists
keeps that replica's server down (it retries with backoff) until the test removes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings
from shared.db import connect
from shared.errors import ErrorType
from shared.queues import rpc_reply_key, rpc_server_requests_key
from shared.rpc.client import RpcClient
from shared.rpc.protocol import RpcReply, RpcRequest, decode_reply, encode
from shared.tools.servers import NO_REPLICA_REASON
from tests.harness import Proc
from tests.integration.gateway.conftest import start_sandbox_worker
from tests.integration.mcp_servers import (
    ToolhostProcess,
    example_server,
    grant,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

Start = Callable[..., ToolhostProcess]
BURST = 40
HELD = "held down by the test"


@pytest.fixture(autouse=True)
def _granted(settings: Settings) -> None:
    grant(settings.redis_url or "", "test")


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client


def _held_example_server(folder: Path) -> dict[str, Any]:
    """The example server, refusing to start while ``folder/hold`` exists."""
    code = (
        "import os, runpy, sys\n"
        f"if os.path.exists({str(folder / 'hold')!r}): sys.exit({HELD!r})\n"
        "runpy.run_module('deploy.examples.example_server', run_name='__main__')\n"
    )
    return {**example_server(folder), "args": ["-c", code]}


def _replicas(tmp_path: Path, toolhost: Start) -> list[tuple[ToolhostProcess, Path]]:
    started = []
    for i in range(2):
        folder = tmp_path / f"replica{i}"
        folder.mkdir()
        config = write_config(folder / "mcp.json", {"example": _held_example_server(folder)})
        started.append((toolhost(config, wait=False), folder))
    for host, _ in started:
        host.wait_ready()
    return started


def _crash_server(host: ToolhostProcess, folder: Path) -> str:
    """Kill the replica's example server and keep it down; returns the replica's id."""
    (folder / "hold").touch()
    (child,) = [
        p
        for p in psutil.Process(host.proc.pid).children(recursive=True)
        if "example_server" in " ".join(p.cmdline())
    ]
    child.kill()

    def held() -> bool:
        beat = host.heartbeat() or {}
        return beat["servers"]["example"] != "ready" and HELD in (
            beat["errors"].get("example") or ""
        )

    wait_for(held, what="the replica's example server held down")
    return f"{socket.gethostname()}:{host.proc.pid}"


def _rows(settings: Settings, sql: str) -> list[dict[str, Any]]:
    with connect(settings.database_url or "") as conn:
        return conn.execute(sql).fetchall()


def _notes(folder: Path) -> int:
    path = folder / "notes" / "notes.json"
    return len(json.loads(path.read_text())) if path.exists() else 0


async def _call(tool: str, args: dict[str, Any], settings: Settings, n: int = 1) -> list[RpcReply]:
    async with RpcClient(settings.redis_url or "") as rpc:
        return list(
            await asyncio.gather(
                *(
                    rpc.call(
                        execution_id="test",
                        tool=tool,
                        args={k: v.format(i=i) for k, v in args.items()},
                        deadline=time.time() + 30,
                    )
                    for i in range(n)
                )
            )
        )


async def test_a_replicas_crashed_server_is_served_by_the_other(
    settings: Settings,
    tmp_path: Path,
    toolhost: Start,
    celery_worker: Callable[..., Proc],
    client: TestClient,
) -> None:
    start_sandbox_worker(settings, celery_worker)  # /healthz is 200 only with one
    (_, healthy_folder), (crashed, crashed_folder) = _replicas(tmp_path, toolhost)
    replica = _crash_server(crashed, crashed_folder)

    # The tools stay available: the other replica still has the server ready.
    servers = {s["name"]: s for s in client.get("/v1/servers").json()["servers"]}
    assert servers["example"]["state"] == "ready", servers["example"]
    views = {r["replica"]: r for r in servers["example"]["replicas"]}
    assert views[replica]["state"] != "ready" and HELD in views[replica]["last_error"]
    assert len(views) == 2
    tools = {t["id"]: t for t in client.get("/v1/tools").json()["tools"]}
    assert tools["example:add_note"]["available"]

    # Every call of a burst succeeds: the crashed replica hands its share to the other.
    replies = await _call("example:add_note", {"title": "n{i}", "body": ""}, settings, n=BURST)
    assert all(r.ok for r in replies), [r.error for r in replies if not r.ok]
    assert (_notes(healthy_folder), _notes(crashed_folder)) == (BURST, 0)

    # /healthz stays 200 and names the replica where the server is down.
    health = client.get("/healthz")
    assert health.status_code == 200, health.text
    body = health.json()
    assert body["status"] == "degraded"
    example = {s["name"]: s for s in body["mcp_servers"]}["example"]
    assert example["state"] == "ready" and HELD in example["down_on"][replica]
    assert replica in body["checks"]["toolhost"]["detail"]

    # Once the server can start again, the replica reconnects (with backoff) and is ready.
    (crashed_folder / "hold").unlink()
    wait_for(
        lambda: (crashed.heartbeat() or {})["servers"]["example"] == "ready",
        timeout_s=60,
        what="the crashed replica's server back",
    )
    wait_for(
        lambda: not _rows(settings, "SELECT 1 FROM toolhost_servers WHERE state <> 'ready'"),
        what="both replicas' rows ready",
    )
    example = {s["name"]: s for s in client.get("/healthz").json()["mcp_servers"]}["example"]
    assert example["down_on"] == {}


async def test_no_live_replica_with_the_server_ready_makes_its_tools_unavailable(
    settings: Settings, tmp_path: Path, toolhost: Start
) -> None:
    (killed, _), (held, held_folder) = _replicas(tmp_path, toolhost)
    _crash_server(held, held_folder)
    assert _rows(settings, "SELECT state FROM mcp_servers") == [{"state": "ready"}]

    # The replica that served it is SIGKILLed: its rows stop counting once its heartbeat
    # is gone, and with them the last ready view of the server.
    os.killpg(killed.proc.pid, signal.SIGKILL)
    killed.proc.wait()
    wait_for(
        lambda: _rows(settings, "SELECT 1 FROM tools WHERE id = 'example:add' AND NOT available"),
        what="example:add unavailable",
    )
    assert _rows(settings, "SELECT state FROM mcp_servers")[0]["state"] != "ready"
    assert [r["replica"] for r in _rows(settings, "SELECT replica FROM toolhost_servers")] == [
        f"{socket.gethostname()}:{held.proc.pid}"
    ]

    # A call fails at once with server_unavailable, not at its deadline.
    (reply,) = await _call("example:add", {}, settings)
    assert reply.error and reply.error.type == ErrorType.SERVER_UNAVAILABLE, reply.error
    # So does a call handed to the server's list just before its last ready replica died:
    # it never started, so it goes back to the shared list and is answered.
    r = redis.Redis.from_url(settings.redis_url or "")
    request = RpcRequest(
        call_id=uuid.uuid4().hex, execution_id="test", tool="example:add", deadline=time.time() + 60
    )
    r.rpush(rpc_server_requests_key("example"), encode(request))
    popped = r.blpop([rpc_reply_key(request.call_id)], timeout=30)
    assert popped is not None, "the stranded call was never answered"
    stranded = decode_reply(popped[1])
    assert stranded.error and stranded.error.type == ErrorType.SERVER_UNAVAILABLE
    assert r.llen(rpc_server_requests_key("example")) == 0

    # A replica that stops cleanly takes its rows with it: nobody serves the server now.
    assert held.stop() == 0
    assert _rows(settings, "SELECT * FROM toolhost_servers") == []
    row = _rows(settings, "SELECT state, last_error FROM mcp_servers")[0]
    assert row == {"state": "down", "last_error": NO_REPLICA_REASON}
