"""The one stack factory of the tests: gateway, toolhost, sandbox (and learning) workers.

``running_stack`` starts one on a fresh database cloned from the session's migrated template.
``stack_fixture`` declares a fixture for a module; every module that declares the same
servers and options shares one running stack (``StackRegistry``), started once per session:
tests/conftest.py runs the modules that share a stack one after another, and stops a stack
once no later test asks for it. Tests on a shared stack keep apart by tenant and key, as
the product keeps its users apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import redis
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from shared.config import Settings, settings_to_env
from tests.harness import Proc, celery_worker_argv, start_logged, stop_all, wait_until

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_DB = "agentcards_template"
E2E_REDIS_DB = 0  # the per-test redis_url fixture cycles through 1..15 of the same server


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment for a child process that should see exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env.update(settings_to_env(settings))
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            # As `agentcards up` runs its children; PYTHONPATH (pytest_configure) keeps
            # them on this checkout's code.
            "PYTHONSAFEPATH": "1",
        }
    )
    return env


@dataclass
class E2EStack:
    """URLs, settings and processes of the running stack."""

    settings: Settings
    gateway_url: str
    tmp: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # for every process (OTEL_*, say)
    headers: dict[str, str] = field(default_factory=dict)  # sent by client() and mcp_session

    def as_new_tenant(self, tenant_id: str | None = None) -> E2EStack:
        """The same stack, its clients speaking for a tenant of their own (a new one unless
        given) with a new key: a shared stack's tests keep apart as the product's users do."""
        from shared.auth.store import issue_key

        with self.db() as conn:
            _, key = issue_key(conn, tenant_id=tenant_id or f"t-{uuid.uuid4().hex[:10]}")
        return dataclasses.replace(self, headers={"Authorization": f"Bearer {key}"})

    def start(self, name: str, argv: list[str], *, extra_env: dict[str, str] | None = None) -> Proc:
        log_path = self.tmp / f"{name}-{uuid.uuid4().hex[:6]}.log"
        env = settings_env(self.settings) | self.env | (extra_env or {})
        proc = Proc(name, start_logged(name, argv, log_path=log_path, env=env, cwd=REPO), log_path)
        self.procs[name] = proc
        return proc

    def start_worker(
        self, name: str, app: str, queues: str, *, concurrency: int, wait: bool = True
    ) -> Proc:
        """A Celery worker; with ``wait``, once it consumes (else see ``wait_ready``)."""
        node = f"{name}-{uuid.uuid4().hex[:6]}@%h"
        proc = self.start(name, celery_worker_argv(app, queues, concurrency=concurrency, node=node))
        if wait:
            self.wait_ready(proc)
        return proc

    @staticmethod
    def wait_ready(proc: Proc) -> None:
        wait_until(lambda: " ready." in proc.log(), what=f"{proc.name} ready", proc=proc)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.gateway_url, headers=self.headers, timeout=90)

    def db(self) -> psycopg.Connection[dict[str, object]]:
        from shared.db import connect

        return connect(self.settings.database_url or "", autocommit=True)


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
    from tests.integration.mcp_servers import write_config

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
            # As `agentcards up` runs them: the toolhost and learning worker embed through
            # the gateway (one model in memory).
            **{"sandbox_wall_time_s": 20, "embeddings_from": "gateway", **settings},
        ),
        gateway_url=f"http://127.0.0.1:{port}",
        tmp=tmp,
        env=env or {},
    )
    wanted = len(servers) if synced_servers is None else synced_servers
    try:
        toolhost = stack.start("toolhost", [sys.executable, "-m", "services.toolhost"])
        gateway = stack.start("gateway", [sys.executable, "-m", "services.gateway"])
        # Every process starts at once; then each is waited for.
        workers = [
            stack.start_worker(
                "sandbox",
                "workers.sandbox.celery_app",
                "executions",
                concurrency=sandbox_slots,
                wait=False,
            )
        ]
        if learning:
            workers.append(
                stack.start_worker(
                    "learning",
                    "workers.learning.celery_app",
                    "learning,maintenance",
                    concurrency=1,
                    wait=False,
                )
            )
        for worker in workers:
            stack.wait_ready(worker)

        def tools_synced() -> bool:
            with stack.db() as conn:
                row = conn.execute(
                    "SELECT count(DISTINCT server) AS n FROM tools WHERE available"
                ).fetchone()
            return row is not None and int(str(row["n"])) >= wanted

        wait_until(tools_synced, what=f"tools of {wanted} servers synced", proc=toolhost)

        def gateway_healthy() -> bool:
            try:
                return httpx.get(f"{stack.gateway_url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(gateway_healthy, what="gateway healthy", proc=gateway)
        yield stack
    finally:
        stop_all(stack.procs.values())
        with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


Servers = Callable[[Path], dict[str, Any]]


def stack_key(servers: Servers, options: dict[str, Any]) -> Hashable:
    """What makes two declared stacks the same: the servers function's code and the names it
    reads (functions by name, constants by value), and the options."""
    code = getattr(servers, "__code__", None)
    if code is None:
        return (id(servers), repr(sorted(options.items())))
    scope = getattr(servers, "__globals__", {})
    names = tuple(
        f"{value.__module__}.{value.__qualname__}" if callable(value) else repr(value)
        for value in (scope.get(name) for name in code.co_names)
    )
    cells = tuple(repr(cell.cell_contents) for cell in servers.__closure__ or ())  # type: ignore[attr-defined]
    return (
        code.co_code,
        repr(code.co_consts),
        code.co_names,
        names,
        cells,
        repr(sorted(options.items())),
    )


DECLARED: dict[Callable[..., Any], Hashable] = {}  # each stack fixture's function -> its key


class StackRegistry:
    """The session's running stacks, one per key; a stack nobody uses stops when asked to."""

    def __init__(
        self,
        embedded_pg: EmbeddedPostgres,
        redis_server: EmbeddedRedis,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        self._pg, self._redis, self._tmp = embedded_pg, redis_server, tmp_path_factory
        self._running: dict[Hashable, tuple[contextlib.ExitStack, E2EStack, int]] = {}
        self._users: dict[Hashable, int] = {}

    @contextlib.contextmanager
    def use(self, key: Hashable, servers: Servers, options: dict[str, Any]) -> Iterator[E2EStack]:
        """The running stack for ``key`` (started on first use), held while inside."""
        if key not in self._running:
            self._start(key, servers, options)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            yield self._running[key][1]
        finally:
            self._users[key] -= 1

    def _start(self, key: Hashable, servers: Servers, options: dict[str, Any]) -> None:
        taken = {db for _, _, db in self._running.values()}
        redis_db = min(set(range(16)) - taken)  # this Redis serves stacks only: any db is free
        tmp = self._tmp.mktemp("stack")
        exits = contextlib.ExitStack()
        stack = exits.enter_context(
            running_stack(self._pg, self._redis, tmp, servers(tmp), redis_db=redis_db, **options)
        )
        self._running[key] = (exits, stack, redis_db)

    def stop_idle(self, *, keep: set[Hashable]) -> None:
        """Stop every stack no test holds, except those in ``keep`` (wanted next)."""
        for key in [k for k in self._running if not self._users.get(k) and k not in keep]:
            exits, _, _ = self._running.pop(key)
            exits.close()

    def close(self) -> None:
        self.stop_idle(keep=set())


REGISTRY: list[StackRegistry] = []  # the session's registry, once a test asked for a stack


def stack_fixture(
    servers: Servers, *, scope: str = "module", shared: bool = True, **options: Any
) -> Any:
    """A fixture (module-scoped) giving the session's stack for ``servers(tmp)`` and
    ``running_stack`` options: modules declaring the same servers and options share it;
    ``shared=False``: a stack of the module's own (say why where it is declared)."""
    key = stack_key(servers, options) if shared else object()

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def stack(stack_registry: StackRegistry) -> Iterator[E2EStack]:
        with stack_registry.use(key, servers, options) as running:
            yield running

    DECLARED[stack] = key
    DECLARED[getattr(stack, "__wrapped__", stack)] = key
    return stack


@contextlib.asynccontextmanager
async def mcp_session(
    stack: E2EStack, *, path: str = "/mcp", headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[ClientSession]:
    """An initialized MCP SDK client session on the stack's ``path`` (`/mcp`; a server's
    direct endpoint `/mcp/servers/<name>`), as ``headers`` (the stack's key's by default);
    ``options``: callbacks."""
    async with (
        create_mcp_http_client(headers=headers or stack.headers) as http,
        streamable_http_client(f"{stack.gateway_url}{path}", http_client=http) as (read, write),
        ClientSession(read, write, **options) as session,
    ):
        await session.initialize()
        yield session


def each_event(response: httpx.Response) -> Iterator[dict[str, str]]:
    """A streamed response's SSE events, field by field, as they come."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            continue
        yield fields
        fields = {}


def tool_error(result: types.CallToolResult) -> dict[str, Any]:
    """A failed MCP tool call's error body: ``{"error": {type, message, details?}}`` as its
    structured content, and the same JSON as its text (clients that read text see it all)."""
    assert result.is_error, result
    envelope = result.structured_content
    assert envelope is not None and set(envelope) == {"error"}, result
    block = result.content[0]
    assert isinstance(block, types.TextContent) and json.loads(block.text) == envelope, result
    body: dict[str, Any] = envelope["error"]
    return body
