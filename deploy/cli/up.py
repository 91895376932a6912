"""`agentcards up` on screen: start the stack, show each MCP server as it settles, then the URLs."""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from deploy.launcher.health import server_lines, wait_healthy, watch
from deploy.launcher.supervisor import Stack
from shared.cache.policy import tool_cache, tool_policy
from shared.config import Settings
from shared.errors import AgentCardsError

WATCH_CHECK_EVERY_S = 5.0  # once healthy, a slower beat: the checks cost a Celery ping each


def run_up(settings: Settings, *, timeout_s: float, console: Console) -> None:
    """Start everything, wait until healthy, watch until SIGINT/SIGTERM; always stop what started."""
    stack = Stack(settings)
    stop_requested = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    started = time.monotonic()
    live = None
    try:
        stack.preflight()  # a broken mcpServers file ends here, before anything slow
        with console.status("starting Postgres and Redis, applying migrations…"):
            stack.start_dependencies()
        example = stack.use_example_servers_if_unconfigured()
        if example:
            console.print(f"no AGENTCARDS_MCP_CONFIG: serving the example MCP server ({example})")
        stack.start_processes()
        shown: dict[str, str] = {}
        if console.is_terminal:
            live = Live(status_table(stack), console=console, auto_refresh=False)
            live.start()

        def show(stack: Stack) -> None:
            if live:
                live.update(status_table(stack), refresh=True)
            else:  # piped: one line per MCP server each time its state changes
                _print_server_changes(stack, shown, console)

        def stopped() -> bool:
            return stop_requested

        if wait_healthy(stack, timeout_s=timeout_s, on_check=show, stopped=stopped):
            _announce(stack, time.monotonic() - started, console)
            watch(stack, check_every_s=WATCH_CHECK_EVERY_S, on_check=show, stopped=stopped)
        if live:
            live.stop()
        console.print("stopping…")
    finally:
        if live:
            live.stop()
        stack.stop()
    console.print("stopped; data kept in " + str(settings.home))


def _print_server_changes(stack: Stack, shown: dict[str, str], console: Console) -> None:
    for name, line in server_lines(stack).items():
        if line != "starting" and shown.get(name) != line:
            console.print(f"  mcp {name:<12} {escape(line)}", soft_wrap=True)
            shown[name] = line
    sys.stdout.flush()


def _announce(stack: Stack, seconds: float, console: Console) -> None:
    """What the README promises: the URLs, then which MCP servers failed and why."""
    lines = server_lines(stack)
    cached = cache_lines(stack)  # read before printing: the announcement comes out in one go
    access = access_line(stack.settings, stack.database_url)
    failed = [name for name, line in lines.items() if not line.startswith("ready")]
    if failed:
        console.print(
            f"[bold yellow]running[/] in {seconds:.1f}s, but {len(failed)} of {len(lines)} "
            "MCP server(s) failed"
        )
    else:
        console.print(f"[bold green]all healthy[/] in {seconds:.1f}s")
    urls = {c.spec.name: c.spec.url for c in stack.children if c.spec.url}
    if gateway := urls.get("gateway"):
        console.print(f"  {'gateway':<16} {gateway}")
        console.print(f"  {'api docs':<16} {gateway}/docs")
        console.print(f"  {'dashboard':<16} {gateway}/dashboard")
    if flower := urls.get("flower"):
        console.print(f"  {'flower':<16} {flower}")
    if access:
        console.print(f"  {'access':<16} {access}", soft_wrap=True)
    if ready := [name for name in lines if name not in failed]:
        console.print(f"  {'MCP servers':<16} {', '.join(ready)}: ready")
    for name, line in cached.items():
        console.print(f"  {'cache ' + name:<16} {escape(line)}", soft_wrap=True)
    for name in failed:
        server = stack.servers.get(name)
        state, _, why = lines[name].partition(": ")
        why = server.error if server and server.error else why or state
        console.print(f"  {state:<16} {name}: {escape(why)}", soft_wrap=True)
    if failed:
        console.print(
            f"  fix them in {stack.settings.mcp_config} (the toolhost keeps retrying); "
            "`agentcards status` shows their state"
        )
    sys.stdout.flush()


def status_table(stack: Stack) -> Table:
    """The live table of a terminal `up`: each process, then each MCP server."""
    table = Table(title="agentcards", expand=False)
    for col in ("process", "pid", "health", "detail", "restarts"):
        table.add_column(col)
    for child in stack.children:
        mark = "[green]healthy[/]" if child.health.ok else "[red]unhealthy[/]"
        pid = str(child.proc.pid) if child.proc else "-"
        table.add_row(child.spec.name, pid, mark, escape(child.health.detail), str(child.restarts))
    for name, line in server_lines(stack).items():
        state, _, why = line.partition(": ")
        mark = f"[green]{state}[/]" if state == "ready" else f"[yellow]{escape(state)}[/]"
        table.add_row(f"mcp {name}", "-", mark, escape(why), "-")
    return table


def cache_lines(stack: Stack) -> dict[str, str]:
    """One line per configured server: which of its tools' results are cached, for how long
    and why (``GET /v1/tools`` says the same per tool); none when the tools cannot be read."""
    import psycopg

    from shared.db import connect
    from shared.tools.store import list_tools

    try:
        with connect(stack.database_url) as conn:
            rows = list_tools(conn)
    except psycopg.Error:
        return {}
    by_server: dict[str, dict[tuple[int, str], list[str]]] = {}
    for row in rows:
        if row["server"] not in stack.mcp_servers:
            continue
        policy = tool_policy(annotations=row["annotations"], override=row["cache_override"])
        cache = tool_cache(policy, read_only_ttl_s=stack.settings.cache_read_only_ttl_s)
        key = (int(cache["ttl_s"]), str(cache["why"]))
        by_server.setdefault(row["server"], {}).setdefault(key, []).append(row["name"])
    lines = {}
    for server, groups in sorted(by_server.items()):
        parts = []
        for (ttl_s, why), names in sorted(groups.items(), reverse=True):
            said = f"{ttl_s} s ({why})" if ttl_s else f"not cached ({why})"
            parts.append(f"{', '.join(sorted(names))}: {said}")
        lines[server] = "; ".join(parts)
    return lines


def access_line(settings: Settings, database_url: str | None) -> str | None:
    """What `up` and `status` say of who may call the gateway: a warning when it is open (no
    active key, or keys not checked), else how many keys are active; None when unreadable."""
    import psycopg

    from shared.auth.openness import open_reason
    from shared.db import connect

    try:
        with connect(database_url or "") as conn:
            active = int(
                conn.execute(
                    "SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL"
                ).fetchone()["n"]  # type: ignore[index]
            )
    except (psycopg.Error, AgentCardsError):
        return None
    reason = open_reason(settings, keys_exist=active > 0)
    if reason:
        return f"[bold yellow]{escape(reason)}[/]"
    return f"API key required ({active} active)" if active else "API key or access token required"
