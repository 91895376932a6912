"""`agentcards gateway|toolhost|worker …`: one process that joins a running stack from its URLs.

A second host runs these instead of `up`: no embedded Postgres or Redis, no migrations,
no state file, nothing under AGENTCARDS_HOME. The command checks what it can see (both
URLs answer, the MCP config parses), then replaces itself with the same command line `up`
would run, so the process group is the caller's and a signal to it reaches every child
(Celery pool processes, stdio MCP servers, sandbox children).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import redis

from deploy.launcher.processes import stack_specs
from services.toolhost.servers import load_servers
from shared.config import Settings
from shared.db import ping, redact
from shared.errors import ConfigError, DependencyError
from shared.offline import OFFLINE_ENV

# The CLI names of the processes a host can run, and their names in `stack_specs`.
JOINABLE = {
    "gateway": "gateway",
    "toolhost": "toolhost",
    "sandbox": "sandbox-worker",
    "learning": "learning-worker",
}


def join_argv(
    settings: Settings,
    process: str,
    *,
    node_name: str | None = None,
    concurrency: int | None = None,
) -> list[str]:
    """The command line of one joinable process; ConfigError when it cannot join."""
    if process not in JOINABLE:
        raise ConfigError(f"unknown process {process!r}: choose one of {', '.join(JOINABLE)}")
    if not settings.database_url or not settings.redis_url:
        raise ConfigError(
            "AGENTCARDS_DATABASE_URL and AGENTCARDS_REDIS_URL must point at the stack to join "
            "(a joining process never starts embedded servers; `agentcards up` does)"
        )
    if process == "toolhost":
        if settings.mcp_config is None:
            raise ConfigError(
                "AGENTCARDS_MCP_CONFIG must name the MCP servers file this toolhost serves "
                "(the same servers as the stack's other toolhosts)"
            )
        load_servers(settings.mcp_config)  # a broken file ends here with its line and column
    spec = next(s for s in stack_specs(settings) if s.name == JOINABLE[process])
    argv = list(spec.argv)
    for flag, value in (("-n", node_name), ("--concurrency", concurrency)):
        if value is not None and flag in argv:
            argv[argv.index(flag) + 1] = str(value)
    return argv


def check_reachable(settings: Settings) -> None:
    """DependencyError naming the URL (password hidden) that does not answer."""
    database_url, redis_url = settings.require_urls()
    ping(database_url)
    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        raise DependencyError(f"Redis at {redact(redis_url)} is unreachable ({exc})") from exc


def exec_process(argv: list[str]) -> NoReturn:
    """Become ``argv``: the settings travel in the environment, as `up` passes them."""
    env = dict(os.environ) | OFFLINE_ENV | {"PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
