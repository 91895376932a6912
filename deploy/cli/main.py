"""The `agentcards` command: up, status, down, mcp, sandbox, bench, demo."""

from __future__ import annotations

import logging
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from deploy.launcher.state import StackState, pid_alive
from shared.config import Settings, get_settings
from shared.errors import AgentCardsError
from shared.offline import go_offline

if TYPE_CHECKING:
    from deploy.launcher.supervisor import Stack

# Every command (bench, demo, the stack it starts) runs offline.
go_offline()

app = typer.Typer(
    help="AgentCards: an MCP gateway that runs agent code in sandboxes and learns from it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)


def _mount_subcommands() -> None:
    from deploy.cli.bench import bench_app
    from deploy.cli.sandbox import sandbox_app

    app.add_typer(bench_app, name="bench")
    app.add_typer(sandbox_app, name="sandbox", help="Run a file in the real sandbox.")


def _settings() -> Settings:
    try:
        return get_settings()
    except AgentCardsError as exc:
        _fail(exc)
        raise  # unreachable; keeps mypy aware


def _fail(exc: BaseException) -> None:
    err.print(f"[bold red]error:[/] {getattr(exc, 'message', None) or exc}")
    raise typer.Exit(code=1)


@app.command()
def up(
    timeout: float = typer.Option(120.0, help="seconds to wait for every process to be healthy"),
) -> None:
    """Start the whole stack (embedded Postgres and Redis unless URLs are set); Ctrl-C stops it."""
    from deploy.launcher.supervisor import Stack

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = _settings()
    stack = Stack(settings)
    stop_requested = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    started = time.monotonic()
    try:
        stack.preflight()
        with console.status("starting Postgres and Redis, applying migrations…"):
            stack.start_dependencies()
        example = stack.use_example_servers_if_unconfigured()
        if example:
            console.print(f"no AGENTCARDS_MCP_CONFIG: serving the example MCP server ({example})")
        stack.start_processes()
    except AgentCardsError as exc:
        stack.stop()
        _fail(exc)
    except Exception as exc:  # anything unexpected still leaves no process behind
        stack.stop()
        _fail(exc)

    healthy_at: float | None = None
    live = (
        Live(_status_table(stack), console=console, auto_refresh=False)
        if console.is_terminal
        else None
    )
    try:
        if live:
            live.start()
        with ThreadPoolExecutor(max_workers=8) as pool:
            last_check = 0.0
            while not stop_requested:
                stack.reap_and_restart()
                if time.monotonic() - last_check >= (1.0 if healthy_at is None else 5.0):
                    stack.check_health(pool)
                    last_check = time.monotonic()
                    if healthy_at is None and stack.all_healthy():
                        healthy_at = time.monotonic() - started
                        _announce(stack, healthy_at)
                    elif healthy_at is None and time.monotonic() - started > timeout:
                        failing = [c.spec.name for c in stack.children if not c.health.ok]
                        raise AgentCardsError(
                            f"not healthy after {timeout:.0f}s: {', '.join(failing)} "
                            f"(logs in {settings.run_dir / 'logs'})"
                        )
                    if live:
                        live.update(_status_table(stack), refresh=True)
                time.sleep(0.2)
    except AgentCardsError as exc:
        if live:
            live.stop()
        stack.stop()
        _fail(exc)
    finally:
        if live:
            live.stop()
    console.print("stopping…")
    stack.stop()
    console.print("stopped; data kept in " + str(settings.home))


def _announce(stack: Stack, seconds: float) -> None:
    console.print(f"[bold green]all healthy[/] in {seconds:.1f}s")
    for child in stack.children:
        if child.spec.url:
            console.print(f"  {child.spec.name:<16} {child.spec.url}")
    gateway = next((c.spec.url for c in stack.children if c.spec.name == "gateway"), None)
    if gateway:
        console.print(f"  {'api docs':<16} {gateway}/docs")
    sys.stdout.flush()


def _status_table(stack: Stack) -> Table:
    table = Table(title="agentcards", expand=False)
    for col in ("process", "pid", "health", "detail", "restarts"):
        table.add_column(col)
    for child in stack.children:
        mark = "[green]healthy[/]" if child.health.ok else "[red]unhealthy[/]"
        pid = str(child.proc.pid) if child.proc else "-"
        table.add_row(child.spec.name, pid, mark, child.health.detail, str(child.restarts))
    return table


@app.command()
def status() -> None:
    """Report each process and dependency as healthy or not, with the reason."""
    from deploy.launcher.processes import stack_specs
    from shared.db import ping

    settings = _settings()
    state = StackState.load(settings.run_dir)
    if state is None or not pid_alive(state.supervisor_pid):
        err.print("no stack is running (start one with `agentcards up`)")
        raise typer.Exit(code=1)
    resolved = settings.model_copy(
        update={"database_url": state.database_url, "redis_url": state.redis_url}
    )
    table = Table(title=f"agentcards (supervisor pid {state.supervisor_pid})")
    for col in ("part", "pid", "health", "detail"):
        table.add_column(col)
    rows: list[tuple[str, str, bool, str]] = []
    try:
        ping(state.database_url)
        rows.append(("postgres", "-", True, "answers, pgvector installed"))
    except AgentCardsError as exc:
        rows.append(("postgres", "-", False, exc.message))
    try:
        import redis

        redis.Redis.from_url(state.redis_url, socket_timeout=2).ping()
        rows.append(("redis", str(state.embedded_redis_pid or "-"), True, "answers PING"))
    except Exception as exc:  # report, don't crash: status must always print
        rows.append(("redis", "-", False, str(exc)))
    specs = stack_specs(resolved)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = {s.name: pool.submit(s.check, resolved) for s in specs}
        for spec in specs:
            child_pid = state.processes.get(spec.name)
            if not pid_alive(child_pid):
                rows.append((spec.name, str(child_pid or "-"), False, "process not running"))
                continue
            health = results[spec.name].result()
            rows.append((spec.name, str(child_pid), health.ok, health.detail))
    for name, shown_pid, ok, detail in rows:
        table.add_row(name, shown_pid, "[green]healthy[/]" if ok else "[red]unhealthy[/]", detail)
    console.print(table)
    for name, url in state.urls.items():
        console.print(f"  {name:<10} {url}")
    if not all(ok for _, _, ok, _ in rows):
        raise typer.Exit(code=1)


@app.command()
def down() -> None:
    """Stop a running stack (data kept)."""
    from deploy.launcher.supervisor import stop_recorded_stack

    console.print(stop_recorded_stack(_settings().run_dir))


@app.command()
def demo(
    keep: bool = typer.Option(False, help="keep a temporary stack running after the session"),
) -> None:
    """Play a scripted agent session: learn a capability, match it, reuse it, see suggestions."""
    from deploy.demo.run import run_demo

    logging.basicConfig(level=logging.WARNING)
    try:
        facts = run_demo(_settings(), keep=keep)
    except AgentCardsError as exc:
        _fail(exc)
    if facts["failed_steps"]:
        raise typer.Exit(code=1)


@app.command()
def migrate() -> None:
    """Apply database migrations to AGENTCARDS_DATABASE_URL (the compose prestart step)."""
    from shared.db import migrate as run_migrations

    try:
        head = run_migrations(_settings())
    except AgentCardsError as exc:
        _fail(exc)
    console.print(f"database at revision {head}")


@app.command()
def mcp() -> None:
    """Serve AgentCards' MCP tools over stdio (for desktop MCP clients); needs a running stack."""
    import asyncio

    from services.gateway.mcp_server import serve_stdio

    settings = _settings()
    state = StackState.load(settings.run_dir)
    if not (settings.database_url and settings.redis_url) and state is not None:
        settings = settings.model_copy(
            update={"database_url": state.database_url, "redis_url": state.redis_url}
        )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(serve_stdio(settings))
    except AgentCardsError as exc:
        _fail(exc)


def main() -> None:
    """Console-script entry point."""
    app()


_mount_subcommands()


if __name__ == "__main__":
    main()
