"""One real stack per module: gateway, toolhost (three real MCP servers), sandbox and learning workers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from shared.config import Settings
from tests.conftest import TEMPLATE_DB, settings_env, with_database
from tests.harness import spawn
from tests.integration.mcp_servers import (
    example_server,
    install_memory_server,
    memory_server,
    time_server,
    write_config,
)

REPO = Path(__file__).resolve().parents[3]
E2E_REDIS_DB = 0  # the per-test redis_url fixture cycles through 1..15


@dataclass
class Proc:
    """A child process of the stack with its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


@dataclass
class E2EStack:
    """URLs, settings and processes of the running stack."""

    settings: Settings
    gateway_url: str
    tmp: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # for every process (OTEL_*, say)

    def start(self, name: str, argv: list[str], *, extra_env: dict[str, str] | None = None) -> Proc:
        log_path = self.tmp / f"{name}-{uuid.uuid4().hex[:6]}.log"
        popen = spawn(
            argv,
            env=settings_env(self.settings) | self.env | (extra_env or {}),
            cwd=REPO,
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        proc = Proc(name, popen, log_path)
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str, app: str, queues: str, *, concurrency: int) -> Proc:
        node = f"{name}-{uuid.uuid4().hex[:6]}@%h"
        proc = self.start(
            name,
            [
                sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues,
                "--concurrency", str(concurrency), "-n", node, "--without-gossip",
                "--without-mingle", "--loglevel", "INFO",
            ],
        )  # fmt: skip
        wait_until(lambda: " ready." in proc.log(), what=f"{name} ready", proc=proc)
        return proc

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.gateway_url, timeout=90)

    def db(self) -> psycopg.Connection[dict[str, object]]:
        from shared.db import connect

        return connect(self.settings.database_url or "", autocommit=True)


def wait_until(
    predicate: object, *, what: str, timeout_s: float = 90, proc: Proc | None = None
) -> None:
    """Poll a zero-argument callable until it is truthy."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.log()[-4000:]}")
        if predicate():
            return
        time.sleep(0.1)
    tail = proc.log()[-4000:] if proc else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


@contextlib.contextmanager
def running_stack(
    embedded_pg: EmbeddedPostgres,
    redis_server: EmbeddedRedis,
    tmp: Path,
    servers: dict[str, Any],
    *,
    redis_db: int = E2E_REDIS_DB,
    synced_servers: int | None = None,
    learning: bool = True,
    env: dict[str, str] | None = None,
    sandbox_slots: int = 2,
    **settings: Any,
) -> Iterator[E2EStack]:
    """Gateway, toolhost with ``servers``, sandbox (and learning) workers on a fresh database."""
    dbname = f"e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {dbname} TEMPLATE {TEMPLATE_DB}")
    redis_url = redis_server.url.rsplit("/", 1)[0] + f"/{redis_db}"
    redis.Redis.from_url(redis_url).flushdb()
    config = write_config(tmp / "mcp.json", servers)
    port = settings.pop("gateway_port", None) or free_port()  # fixed: a public URL names it
    stack = E2EStack(
        settings=Settings(
            database_url=with_database(embedded_pg.url, dbname),
            redis_url=redis_url,
            env="test",
            home=tmp / "home",
            mcp_config=config,
            gateway_port=port,
            **{"sandbox_wall_time_s": 20, **settings},
        ),
        gateway_url=f"http://127.0.0.1:{port}",
        tmp=tmp,
        env=env or {},
    )
    wanted = len(servers) if synced_servers is None else synced_servers
    try:
        toolhost = stack.start("toolhost", [sys.executable, "-m", "services.toolhost"])
        gateway = stack.start("gateway", [sys.executable, "-m", "services.gateway"])
        stack.start_worker(
            "sandbox", "workers.sandbox.celery_app", "executions", concurrency=sandbox_slots
        )
        if learning:
            stack.start_worker(
                "learning", "workers.learning.celery_app", "learning,maintenance", concurrency=1
            )

        def tools_synced() -> bool:
            with stack.db() as conn:
                row = conn.execute(
                    "SELECT count(DISTINCT server) AS n FROM tools WHERE available"
                ).fetchone()
            return bool(row) and int(row["n"]) >= wanted  # type: ignore[call-overload]

        wait_until(tools_synced, what=f"tools of {wanted} servers synced", proc=toolhost)

        def gateway_healthy() -> bool:
            try:
                return httpx.get(f"{stack.gateway_url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(gateway_healthy, what="gateway healthy", proc=gateway)
        yield stack
    finally:
        for proc in reversed(list(stack.procs.values())):
            proc.stop()
        with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


def stack_fixture(
    servers: Callable[[Path], dict[str, Any]], *, scope: str = "module", **options: Any
) -> Any:
    """A fixture (module-scoped by default) running its own stack: ``servers(tmp)``, ``running_stack`` options."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def stack(
        embedded_pg: EmbeddedPostgres,
        redis_server: EmbeddedRedis,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Iterator[E2EStack]:
        tmp = tmp_path_factory.mktemp("e2e")
        with running_stack(embedded_pg, redis_server, tmp, servers(tmp), **options) as running:
            yield running

    return stack


e2e = stack_fixture(
    lambda tmp: {
        "example": example_server(tmp),
        "time": time_server(),
        "memory": memory_server(install_memory_server(), tmp),
    }
)


@contextlib.asynccontextmanager
async def mcp_session(stack: E2EStack, **options: Any) -> AsyncIterator[ClientSession]:
    """An initialized MCP SDK client session on the stack's `/mcp` (``options``: callbacks)."""
    async with (
        streamable_http_client(f"{stack.gateway_url}/mcp") as (read, write),
        ClientSession(read, write, **options) as session,
    ):
        await session.initialize()
        yield session
