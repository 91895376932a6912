"""`agentcards up`: start dependencies and every process, watch them, stop all cleanly."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import redis
from pydantic import SecretStr

from deploy.launcher.backoff import Backoff
from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, port_in_use
from deploy.launcher.processes import Health, ProcessSpec, read_servers, stack_specs
from deploy.launcher.state import StackState, pid_alive, running_settings
from services.toolhost.servers import load_servers
from shared.config import Settings, settings_to_env
from shared.db import check_pgvector_available, migrate, redact
from shared.errors import ConfigError, DependencyError
from shared.privacy.keys import ensure_key_file
from shared.rpc.heartbeat import ServerHealth

log = logging.getLogger(__name__)

# The checkout holding this package when it runs from one (not from site-packages).
_ROOT = Path(__file__).resolve().parents[2]
_SOURCE_ROOT: Path | None = _ROOT if (_ROOT / "pyproject.toml").is_file() else None

STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def _child_preexec() -> None:
    """New session (so we signal whole trees) and SIGTERM if the supervisor dies (no orphans)."""
    os.setsid()
    with contextlib.suppress(OSError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    """A running (or restarting) child process and its bookkeeping."""

    spec: ProcessSpec
    proc: subprocess.Popen[bytes] | None = None
    backoff: Backoff = field(default_factory=Backoff)
    health: Health = field(default_factory=lambda: Health(False, "starting"))
    log_file: IO[bytes] | None = None

    @property
    def restarts(self) -> int:
        return self.backoff.restarts


class Stack:
    """The whole system on one machine, embedded dependencies unless URLs are configured."""

    def __init__(
        self,
        settings: Settings,
        *,
        extra_env: dict[str, str] | None = None,
        without: Collection[str] = (),
    ) -> None:
        if settings.signin and settings.flower_basic_auth is None:
            # Flower is served through the gateway (services.gateway.flower), which sends this
            # password: without one Flower's API refuses everyone, and anyone on this machine
            # could read its pages on loopback.
            password = SecretStr(f"gateway:{secrets.token_urlsafe(24)}")
            settings = settings.model_copy(update={"flower_basic_auth": password})
        self.settings = settings
        self.extra_env = extra_env or {}
        self.without = frozenset(without)  # names of `stack_specs` processes not to run
        self.run_dir = settings.run_dir
        self.pg: EmbeddedPostgres | None = None
        self.redis: EmbeddedRedis | None = None
        self.children: list[Child] = []
        self.database_url = settings.database_url or ""
        self.redis_url = settings.redis_url or ""
        self.mcp_servers: list[str] = []  # names in the config, once preflight read it
        self.servers: dict[str, ServerHealth] = {}  # as the toolhosts' heartbeats report them
        self.redis_backoff = Backoff()
        self.pg_backoff = Backoff()
        self.paused: Callable[[], bool] = lambda: False  # a test harness holds restarts back

    # -- start -------------------------------------------------------------------------
    def preflight(self) -> None:
        """Refuse to start on problems we can see before touching anything."""
        existing = StackState.load(self.run_dir)
        if existing and pid_alive(existing.supervisor_pid):
            raise ConfigError(
                f"a stack is already running (pid {existing.supervisor_pid}); "
                "use `agentcards status` or `agentcards down`"
            )
        if self.settings.mcp_config and not self.settings.mcp_config.is_file():
            raise ConfigError(
                f"MCP servers config {self.settings.mcp_config} does not exist: fix "
                "AGENTCARDS_MCP_CONFIG or unset it"
            )
        # The toolhost would exit on a broken file and be restarted forever: refuse it now.
        self.mcp_servers = list(load_servers(self.settings.mcp_config))
        listeners = [  # must be free now; the embedded Redis checks its own when it starts
            ("gateway", self.settings.gateway_port, "AGENTCARDS_GATEWAY_PORT"),
            ("Flower", self.settings.flower_port, "AGENTCARDS_FLOWER_PORT"),
        ]
        redis_port = (
            "embedded Redis",
            self.settings.embedded_redis_port,
            "AGENTCARDS_EMBEDDED_REDIS_PORT",
        )
        # Two of ours on one port: the later one would fail to bind on every restart.
        taken: dict[int, tuple[str, str]] = {}
        for what, port, var in [*listeners, *([] if self.redis_url else [redis_port])]:
            if port in taken:
                other, other_var = taken[port]
                raise ConfigError(
                    f"port {port} is set for both the {other} ({other_var}) and the "
                    f"{what} ({var}): give each its own"
                )
            taken[port] = (what, var)
        for what, port, var in listeners:
            if port_in_use(port):
                raise ConfigError(f"port {port} for the {what} is in use: free it or set {var}")

    def start_dependencies(self) -> None:
        """Embedded Postgres/Redis unless URLs are configured; then migrations."""
        home = self.settings.home
        home.mkdir(parents=True, exist_ok=True)
        if self.settings.pii_key is None:  # every child reads the same key (docs/privacy.md)
            ensure_key_file(home)
        if not self.redis_url:
            self.redis = EmbeddedRedis.start(home / "redis", port=self.settings.embedded_redis_port)
            self.redis_url = self.redis.url
        else:
            try:
                redis.Redis.from_url(self.redis_url, socket_connect_timeout=3).ping()
            except redis.RedisError as exc:
                raise DependencyError(
                    f"Redis at {redact(self.redis_url)} is unreachable ({exc}): start it or "
                    "unset AGENTCARDS_REDIS_URL to use the embedded one"
                ) from exc
        if not self.database_url:
            self.pg = EmbeddedPostgres.start(home / "pgdata")
            self.database_url = self.pg.url
        check_pgvector_available(self.database_url)
        migrate(self.settings, url=self.database_url)

    def child_env(self) -> dict[str, str]:
        """What every child sees: our environment, our settings, the resolved server URLs."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
        env.update(settings_to_env(self.settings))
        if "AGENTCARDS_CELERY_TASK_EVENTS" not in os.environ:
            # The stack runs Flower, which shows a task only from its events; its own
            # `enable_events` reaches the workers late (tests/integration/observability).
            env["AGENTCARDS_CELERY_TASK_EVENTS"] = "true"
        if "AGENTCARDS_EMBEDDINGS_FROM" not in os.environ:
            # One model in memory: the toolhost and learning worker ask the gateway.
            env["AGENTCARDS_EMBEDDINGS_FROM"] = "gateway"
        env.update(self.extra_env)
        env.update(
            {
                "AGENTCARDS_DATABASE_URL": self.database_url,
                "AGENTCARDS_REDIS_URL": self.redis_url,
                "AGENTCARDS_HOME": str(self.settings.home),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
                # `python -m` would put the caller's cwd first on sys.path: a folder named
                # shared/, services/ or workers/ there would shadow our packages.
                "PYTHONSAFEPATH": "1",
            }
        )
        if _SOURCE_ROOT is not None:
            # Run from a checkout (a git worktree, say): the children import the code this
            # process runs, not whichever checkout the editable install points at.
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(_SOURCE_ROOT), env.get("PYTHONPATH")) if p
            )
        return env

    def use_example_servers_if_unconfigured(self) -> Path | None:
        """No MCP config given: serve the bundled example server so a first run has tools."""
        if self.settings.mcp_config is not None:
            return None
        path = self.settings.home / "mcp_servers.example.json"
        server = {"command": sys.executable, "args": ["-m", "deploy.examples.example_server"]}
        path.write_text(json.dumps({"mcpServers": {"example": server}}, indent=2))
        self.settings = self.settings.model_copy(update={"mcp_config": path})
        self.mcp_servers = ["example"]
        return path

    def start_processes(self) -> None:
        """Spawn every child with logs under run/logs."""
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        specs = stack_specs(self.settings)
        unknown = self.without - {spec.name for spec in specs}
        if unknown:
            raise ConfigError(f"no such stack process: {', '.join(sorted(unknown))}")
        self.children = [Child(spec) for spec in specs if spec.name not in self.without]
        for child in self.children:
            self._spawn(child)
        self.save_state()

    def _spawn(self, child: Child) -> None:
        if child.log_file:
            child.log_file.close()
        child.log_file = (self.run_dir / "logs" / f"{child.spec.name}.log").open("ab")
        child.proc = subprocess.Popen(
            child.spec.argv,
            env=self.child_env() | child.spec.env,
            stdin=subprocess.DEVNULL,
            stdout=child.log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_preexec,
        )
        child.backoff.started(time.monotonic())
        child.health = Health(False, "starting")

    def save_state(self) -> None:
        StackState(
            supervisor_pid=os.getpid(),
            database_url=self.database_url,
            redis_url=self.redis_url,
            embedded_postgres=str(self.pg.pgdata) if self.pg else None,
            embedded_redis_pid=self.redis.process.pid if self.redis else None,
            processes={c.spec.name: c.proc.pid for c in self.children if c.proc},
            urls={c.spec.name: c.spec.url for c in self.children if c.spec.url},
            settings=running_settings(self.settings),
        ).save(self.run_dir)

    # -- watch -------------------------------------------------------------------------
    def resolved_settings(self) -> Settings:
        return self.settings.model_copy(
            update={"database_url": self.database_url, "redis_url": self.redis_url}
        )

    def check_health(self, pool: ThreadPoolExecutor) -> None:
        """Run every child's probe concurrently; a dead process is unhealthy whatever it said."""
        settings = self.resolved_settings()
        futures = {c.spec.name: pool.submit(c.spec.check, settings) for c in self.children}
        self.servers = read_servers(settings)
        for child in self.children:
            result = futures[child.spec.name].result()
            if child.proc is None or child.proc.poll() is not None:
                code = child.proc.returncode if child.proc else None
                child.health = Health(False, f"exited with code {code}; restarting")
            else:
                child.health = result

    def reap_and_restart(self) -> None:
        """Restart embedded Redis/Postgres and children that died, with exponential backoff."""
        if self.paused():
            return
        now = time.monotonic()
        self._restart_dependencies(now)
        for child in self.children:
            if child.proc is None or child.proc.poll() is None:
                continue
            delay = child.backoff.exited(now)
            if delay is not None:
                # Its Celery pool or MCP servers may outlive it in its group: they would hold
                # executions and sessions nobody owns. The group is ours (setsid at spawn).
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.proc.pid, signal.SIGKILL)
                log.warning(
                    "%s exited with %s; restart in %.0fs",
                    child.spec.name,
                    child.proc.returncode,
                    delay,
                )
            elif child.backoff.due(now):
                self._spawn(child)
                self.save_state()

    def _restart_dependencies(self, now: float) -> None:
        """The embedded servers get the same care as children: the stack is useless without them."""
        if self.redis:
            self._revive("Redis", self.redis.running, self._restart_redis, self.redis_backoff, now)
        if self.pg:
            self._revive("PostgreSQL", self.pg.running, self.pg.restart, self.pg_backoff, now)

    def _restart_redis(self) -> None:
        assert self.redis is not None
        self.redis = self.redis.restart()  # same port, password and AOF: URLs stay valid

    def _revive(
        self,
        name: str,
        running: Callable[[], bool],
        restart: Callable[[], None],
        backoff: Backoff,
        now: float,
    ) -> None:
        if running():
            return
        delay = backoff.exited(now)
        if delay is not None:
            log.warning("embedded %s exited; restart in %.0fs", name, delay)
        elif backoff.due(now):
            try:
                restart()
            except DependencyError as exc:  # still down: the next round schedules a retry
                log.warning("embedded %s restart failed: %s", name, exc)
            backoff.started(time.monotonic())
            self.save_state()

    def all_healthy(self) -> bool:
        return all(c.health.ok for c in self.children)

    # -- stop --------------------------------------------------------------------------
    def stop(self) -> None:
        """Children in reverse start order (SIGTERM, then SIGKILL), then Redis, then Postgres."""
        for child in reversed(self.children):
            if child.proc and child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in reversed(self.children):
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.proc.pid, signal.SIGKILL)
                child.proc.wait()
            # The group may hold grandchildren (Celery pool, MCP servers): make sure.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.proc.pid, signal.SIGKILL)
            if child.log_file:
                child.log_file.close()
        if self.redis:
            self.redis.stop()
        if self.pg:
            self.pg.stop()
        StackState.remove(self.run_dir)


def stop_recorded_stack(run_dir: Path, *, timeout_s: float = 30.0) -> str:
    """`agentcards down`: ask the supervisor to stop; clean up after it if it is gone."""
    state = StackState.load(run_dir)
    if state is None:
        return "no stack is running"
    if pid_alive(state.supervisor_pid):
        os.kill(state.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(state.supervisor_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pid_alive(state.supervisor_pid):
            return "stack stopped"
    # Supervisor died without cleaning up: kill what it left behind.
    for pid in state.processes.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if state.embedded_redis_pid and pid_alive(state.embedded_redis_pid):
        os.kill(state.embedded_redis_pid, signal.SIGTERM)
    if state.embedded_postgres:
        with contextlib.suppress(DependencyError):
            EmbeddedPostgres.start(Path(state.embedded_postgres)).stop()
    StackState.remove(run_dir)
    return "stack stopped (supervisor was gone; cleaned up its processes)"
