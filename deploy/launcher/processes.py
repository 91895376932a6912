"""The processes `agentcards up` runs, their command lines, and how each one's health is checked."""

from __future__ import annotations

import socket
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from shared.config import Settings
from shared.queues import Queue
from shared.rpc.heartbeat import (
    ServerHealth,
    read_toolhost_beats,
    server_health,
    toolhost_health,
)

PY = sys.executable


@dataclass(frozen=True)
class Health:
    """Outcome of one health check."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class ProcessSpec:
    """One child process of the stack."""

    name: str
    argv: list[str]
    check: Callable[[Settings], Health]
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def stack_specs(settings: Settings) -> list[ProcessSpec]:
    """Gateway, toolhost, sandbox worker, learning worker, beat and Flower, in start order."""
    host = socket.gethostname()
    # JSON logs: no start-up banner (text) in the middle of the JSON lines.
    celery = [PY, "-m", "celery", *(["--quiet"] if settings.log_format == "json" else [])]
    flower_auth = (
        [f"--basic-auth={settings.flower_basic_auth.get_secret_value()}"]
        if settings.flower_basic_auth
        else []
    )
    # People who sign in reach Flower through the gateway's /flower/ (docs/identity.md).
    flower_prefix = ["--url_prefix=flower"] if settings.signin else []
    return [
        ProcessSpec(
            "gateway",
            [PY, "-m", "services.gateway"],
            check_gateway,
            url=f"http://{settings.gateway_host}:{settings.gateway_port}",
        ),
        ProcessSpec("toolhost", [PY, "-m", "services.toolhost"], check_toolhost),
        ProcessSpec(
            "sandbox-worker",
            [
                *celery,
                "-A",
                "workers.sandbox.celery_app",
                "worker",
                "-Q",
                Queue.EXECUTIONS.value,
                "-n",
                f"sandbox@{host}",
                "--concurrency",
                str(settings.sandbox_workers),
                "--loglevel",
                "INFO",
            ],
            _celery_check(f"sandbox@{host}"),
        ),
        ProcessSpec(
            "learning-worker",
            [
                *celery,
                "-A",
                "workers.learning.celery_app",
                "worker",
                "-Q",
                f"{Queue.LEARNING.value},{Queue.MAINTENANCE.value}",
                "-n",
                f"learning@{host}",
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
            ],
            _celery_check(f"learning@{host}"),
        ),
        ProcessSpec(
            "beat",
            [
                *celery,
                "-A",
                "workers.learning.celery_app",
                "beat",
                "--loglevel",
                "INFO",
                "-s",
                str(settings.run_dir / "celerybeat-schedule"),
            ],
            check_alive_only,
        ),
        ProcessSpec(
            "flower",
            [
                *celery,
                "-A",
                "workers.learning.celery_app",
                "flower",
                f"--port={settings.flower_port}",
                "--address=127.0.0.1",
                *flower_prefix,
                *flower_auth,
            ],
            check_flower,
            url=flower_url(settings),
        ),
    ]


def check_gateway(settings: Settings) -> Health:
    """The gateway's own /healthz (which checks Postgres and Redis)."""
    url = f"http://{settings.gateway_host}:{settings.gateway_port}/healthz"
    return _http_ok(url)


def flower_url(settings: Settings) -> str:
    """Where people open Flower: the gateway's /flower/ when they sign in, else Flower itself."""
    return settings.gateway_flower_url or f"http://127.0.0.1:{settings.flower_port}"


def check_flower(settings: Settings) -> Health:
    """Flower's /healthcheck endpoint (under its prefix when the gateway serves it)."""
    prefix = "/flower" if settings.signin else ""
    return _http_ok(f"http://127.0.0.1:{settings.flower_port}{prefix}/healthcheck")


def check_toolhost(settings: Settings) -> Health:
    """A ready toolhost heartbeat: every configured MCP server is ready or has failed once."""
    try:
        health = toolhost_health(redis.Redis.from_url(settings.redis_url or "", socket_timeout=2))
    except redis.RedisError as exc:
        return Health(False, f"redis: {exc}")
    return Health(health.ok, health.detail)


def read_servers(settings: Settings) -> dict[str, ServerHealth]:
    """Each MCP server's state and last error, as the toolhosts report them (none if unknown)."""
    try:
        client = redis.Redis.from_url(settings.redis_url or "", socket_timeout=2)
        return server_health(read_toolhost_beats(client))
    except redis.RedisError:
        return {}  # the toolhost check reports Redis itself


def check_alive_only(settings: Settings) -> Health:
    """Processes without a probe are healthy while they run (the supervisor checks that)."""
    return Health(True, "running")


def _celery_check(node: str) -> Callable[[Settings], Health]:
    def check(settings: Settings) -> Health:
        from shared.broker import make_celery

        app = make_celery("agentcards-status", settings=settings)
        try:
            replies = app.control.ping(destination=[node], timeout=1.5)
        except Exception as exc:  # kombu raises several connection errors
            return Health(False, f"broker: {exc}")
        finally:
            app.close()
        return (
            Health(True, "answers ping")
            if replies
            else Health(False, f"{node} did not answer ping")
        )

    return check


def _http_ok(url: str) -> Health:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return Health(True, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        body = exc.read(300).decode(errors="replace")
        return Health(False, f"HTTP {exc.code}: {body}")
    except OSError as exc:
        return Health(False, f"unreachable: {getattr(exc, 'reason', exc)}")
