"""A second host joins a running stack with only its URLs and MCP config, and may die mid-burst.

Host A is `agentcards up`'s whole stack (the harness: embedded Redis, supervisor, every
process). Host B is four `agentcards gateway|toolhost|worker …` processes with their own
AGENTCARDS_HOME and their own copy of the MCP config: the two share only the Postgres and
Redis URLs. The tool both toolhosts call is one example server over HTTP (the "outside
world"), so a note written twice would show, whichever host ran the call.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import redis

from deploy.launcher.embedded import free_port
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.db import connect
from shared.rpc.heartbeat import read_toolhost_beats
from tests.harness import spawn, track
from tests.stack import wait_until

REPO = Path(__file__).resolve().parents[3]
BURST = 40
TERMINAL = {"succeeded", "failed", "timeout", "cancelled", "worker_lost", "rejected"}
INTENT = "save a note that proves which host ran"
CODE = """
import asyncio
await mcp.example.add_note(title=args["token"], body="two hosts")
await asyncio.sleep(1.0)
return args["token"]
"""
# A task's hard limit is the longest wall time + 60 s, and the visibility timeout must
# exceed it: 10 s runs give a 75 s redelivery of what the killed host had prefetched.
LIMITS: dict[str, Any] = {
    "sandbox_wall_time_s": 10,
    "sandbox_max_wall_time_s": 10,
    "celery_visibility_timeout_s": 75,
    "execution_queue_max_s": 150,
}


@dataclass
class Host:
    """The processes of the second host, each in its own process group."""

    home: Path
    env: dict[str, str]
    gateway_url: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, *args: str) -> None:
        log = (self.home / f"{name}.log").open("wb")
        self.procs[name] = track(  # its group is stopped at exit if the test is cut short
            subprocess.Popen(
                [sys.executable, "-m", "deploy.cli.main", *args],
                env=self.env,
                cwd=self.home,  # nothing of host A's folders
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text(errors="replace")

    def kill(self) -> None:
        """Host loss: SIGKILL every process group (Celery pools, MCP servers, sandboxes)."""
        for popen in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
        for popen in self.procs.values():
            popen.wait()


@pytest.fixture
def notes_url(tmp_path: Path) -> Iterator[str]:
    """The example MCP server over streamable HTTP: one note list for every toolhost."""
    port = free_port()
    proc = spawn(  # stopped at exit, and dies with pytest, if the test is cut short
        [sys.executable, "-m", "deploy.examples.example_server", "--http", str(port)],
        cwd=REPO,
        stdout=(tmp_path / "notes.log").open("wb"),
        stderr=subprocess.STDOUT,
    )

    def listening() -> bool:
        with contextlib.suppress(OSError):
            return any(c.laddr.port == port for c in psutil.Process(proc.pid).net_connections())
        return False

    wait_until(listening, what="example server listening")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def _mcp_config(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mcp_servers.json"
    path.write_text(json.dumps({"mcpServers": {"example": {"url": url}}}))
    return path


@pytest.fixture
def host_a(pg_url: str, notes_url: str, tmp_path: Path) -> Iterator[StackHandle]:
    config = _mcp_config(tmp_path / "a", notes_url)
    # Its own stack, as `agentcards up` runs it: a second host joins its database and Redis.
    with temporary_stack(
        mcp_config=config, sandbox_workers=2, database_url=pg_url, env="test", **LIMITS
    ) as handle:
        yield handle


@pytest.fixture
def host_b(host_a: StackHandle, notes_url: str, tmp_path: Path) -> Iterator[Host]:
    home = tmp_path / "b"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    port = free_port()
    env |= {f"AGENTCARDS_{k.upper()}": str(v) for k, v in LIMITS.items()} | {
        "AGENTCARDS_HOME": str(home),
        "AGENTCARDS_ENV": "test",
        "AGENTCARDS_DATABASE_URL": host_a.settings.database_url or "",
        "AGENTCARDS_REDIS_URL": host_a.settings.redis_url or "",
        "AGENTCARDS_MCP_CONFIG": str(_mcp_config(home, notes_url)),
        "AGENTCARDS_GATEWAY_PORT": str(port),
        "PYTHONPATH": str(REPO),
    }
    host = Host(home=home, env=env, gateway_url=f"http://127.0.0.1:{port}")
    host.start("toolhost", "toolhost")
    host.start("gateway", "gateway")
    host.start("sandbox", "worker", "sandbox", "--concurrency", "2", "--name", "sandbox-b@%h")
    host.start("learning", "worker", "learning", "--name", "learning-b@%h")
    try:
        _wait_joined(host, host_a)
        yield host
    finally:
        host.kill()


def _wait_joined(host: Host, host_a: StackHandle) -> None:
    broker = redis.Redis.from_url(host_a.settings.redis_url or "")
    for name in ("sandbox", "learning"):
        wait_until(lambda n=name: " ready." in host.log(n), what=f"host B {name} worker ready")
    wait_until(
        lambda: sum(b.ready for b in read_toolhost_beats(broker)) == 2,
        what="both hosts' toolhosts ready",
    )

    def gateway_up() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{host.gateway_url}/healthz", timeout=2).status_code == 200
        return False

    wait_until(gateway_up, what=f"host B gateway healthy\n{host.log('gateway')[-2000:]}")


def _pool_pids(pid: int) -> set[int]:
    return {child.pid for child in psutil.Process(pid).children()}


def _rows(handle: StackHandle, ids: list[str]) -> list[dict[str, Any]]:
    with connect(handle.settings.database_url or "", autocommit=True) as conn:
        return conn.execute(
            "SELECT id::text, status, worker, learned_at FROM executions WHERE id::text = ANY(%s)",
            (ids,),
        ).fetchall()


def _host_of(row: dict[str, Any], pools: dict[str, set[int]]) -> str | None:
    pid = int(str(row["worker"]).rsplit(":", 1)[1]) if row["worker"] else None
    return next((name for name, pids in pools.items() if pid in pids), None)


@pytest.mark.timeout(600)
def test_second_host_takes_work_and_losing_it_loses_nothing(
    host_a: StackHandle, host_b: Host
) -> None:
    sandbox_a = next(c for c in host_a.stack.children if c.spec.name == "sandbox-worker")
    assert sandbox_a.proc is not None
    pools = {"A": _pool_pids(sandbox_a.proc.pid), "B": _pool_pids(host_b.procs["sandbox"].pid)}
    run = uuid.uuid4().hex[:8]
    tokens = [f"tok-{run}-{i}" for i in range(BURST)]
    ids: dict[str, str] = {}
    gateways = [host_a.gateway_url, host_b.gateway_url]
    for i, token in enumerate(tokens):  # both gateways take submissions
        response = httpx.post(
            f"{gateways[i % 2]}/v1/executions",
            json={
                "code": CODE,
                "args": {"token": token},
                "intent": INTENT,
                "idempotency_key": token,
            },
            timeout=30,
        )
        assert response.status_code == 202, response.text
        ids[token] = response.json()["id"]

    def both_hosts_running() -> bool:
        hosts = Counter(_host_of(r, pools) for r in _rows(host_a, list(ids.values())))
        return hosts["A"] >= 1 and hosts["B"] >= 1

    wait_until(both_hosts_running, what="both hosts running executions")
    host_b.kill()

    views: dict[str, dict[str, Any]] = {}

    def all_terminal() -> bool:  # reads through host A's gateway reap stale rows too
        with httpx.Client(base_url=host_a.gateway_url, timeout=30) as client:
            for token, execution_id in ids.items():
                views[token] = client.get(f"/v1/executions/{execution_id}").json()
        return all(v.get("status") in TERMINAL for v in views.values())

    wait_until(all_terminal, what="every execution terminal", timeout_s=300)
    rows = _rows(host_a, list(ids.values()))
    ran_on = Counter(_host_of(r, pools) for r in rows if r["worker"])
    notes = _note_counts(host_a)
    statuses = Counter(v["status"] for v in views.values())
    succeeded = statuses["succeeded"]
    wait_until(lambda: all(r["learned_at"] for r in _rows(host_a, list(ids.values()))),
               what="learning caught up", timeout_s=240)  # fmt: skip
    usage = _usage(host_a)
    duplicates = sum(1 for t in tokens if notes[t] > 1)
    print(
        f"\nTWO HOSTS | submitted={BURST} | terminal={dict(statuses)} | ran_on={dict(ran_on)} "
        f"| non_terminal=0 | duplicates={duplicates} | usage={usage} | succeeded={succeeded}"
    )
    assert ran_on["A"] >= 1 and ran_on["B"] >= 1, ran_on
    assert None not in ran_on, "an execution ran on a process of neither host"
    assert duplicates == 0
    assert set(statuses) <= {"succeeded", "worker_lost", "failed"}, statuses
    assert statuses["worker_lost"] >= 1  # host B died holding runs
    for token, view in views.items():
        if view["status"] == "succeeded":
            assert view["result"] == token and notes[token] == 1
    assert usage == succeeded


def _note_counts(handle: StackHandle) -> Counter[str]:
    response = httpx.post(
        f"{handle.gateway_url}/v1/executions",
        params={"wait": "true"},
        json={"code": "return await mcp.example.list_notes()"},
        timeout=60,
    )
    body = response.json()
    assert body["status"] == "succeeded", body
    return Counter(note["title"] for note in body["result"])


def _usage(handle: StackHandle) -> int:
    with connect(handle.settings.database_url or "", autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(sum(usage_count), 0) AS n FROM capabilities").fetchone()
    return int(row["n"]) if row else 0
