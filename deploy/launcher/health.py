"""Waiting until a stack is healthy, and how its MCP servers read: shared by `up` and the harness."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from deploy.launcher.supervisor import Stack
from shared.errors import DependencyError

CHECK_EVERY_S = 0.5
REAP_EVERY_S = 0.2  # a crashed child is noticed (and its restart scheduled) this fast


def wait_healthy(
    stack: Stack,
    *,
    timeout_s: float,
    on_check: Callable[[Stack], None] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> bool:
    """Poll every child until all are healthy (True), or ``stopped()`` (False); raise on timeout.

    The toolhost counts as healthy once every configured MCP server is ready or has
    failed (see ``shared.rpc.heartbeat``), so this also waits for the servers.
    """
    return watch(stack, healthy_within_s=timeout_s, on_check=on_check, stopped=stopped)


def watch(
    stack: Stack,
    *,
    check_every_s: float = CHECK_EVERY_S,
    healthy_within_s: float | None = None,
    on_check: Callable[[Stack], None] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> bool:
    """Restart crashed children and check health every ``check_every_s`` until ``stopped()``.

    With ``healthy_within_s``, return True as soon as all are healthy, and raise naming
    the laggards past that deadline. ``on_check`` runs after every round (live display).
    """
    deadline = time.monotonic() + (healthy_within_s or 0.0)
    last_check = 0.0
    with ThreadPoolExecutor(max_workers=8) as pool:
        while not stopped():
            stack.reap_and_restart()
            if time.monotonic() - last_check >= check_every_s:
                stack.check_health(pool)
                last_check = time.monotonic()
                if on_check:
                    on_check(stack)
                if healthy_within_s is not None and stack.all_healthy():
                    return True
                if healthy_within_s is not None and last_check > deadline:
                    failing = {
                        c.spec.name: c.health.detail for c in stack.children if not c.health.ok
                    }
                    tails = "".join(
                        f"\n--- last lines of {name}.log ---\n{_log_tail(stack, name)}"
                        for name in failing
                    )
                    raise DependencyError(
                        f"stack not healthy after {healthy_within_s:.0f}s: {failing} "
                        f"(logs in {stack.run_dir / 'logs'}){tails}",
                        failing=failing,
                    )
            time.sleep(REAP_EVERY_S)
    return False


def _log_tail(stack: Stack, name: str, lines: int = 15) -> str:
    """The end of a child's log: why it is not healthy, without a trip to the log folder."""
    try:
        text = (stack.run_dir / "logs" / f"{name}.log").read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def server_lines(stack: Stack) -> dict[str, str]:
    """One line per configured MCP server, in the states ``agentcards status`` and
    ``/v1/servers`` show: ``ready`` (naming the replicas where it is down, if any),
    ``connecting`` or ``retrying: why``."""
    lines = {}
    for name in stack.mcp_servers:
        server = stack.servers.get(name)
        if server is None:
            lines[name] = "starting"
        elif server.failed:
            lines[name] = f"{server.state}: {server.error}"
        elif server.degraded:
            lines[name] = f"ready (down on {', '.join(server.down_on)})"
        else:
            lines[name] = server.state
    return lines
