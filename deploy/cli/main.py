"""The `agentcards` command: up, status, down, gateway, toolhost, worker, mcp, keys, policy, bench, …"""

from __future__ import annotations

import gc
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy.launcher.state import pid_alive, running_stack
from shared.config import Settings, get_settings
from shared.errors import AgentCardsError
from shared.offline import go_offline
from shared.wait_for import patch_wait_for

# Every command (bench, demo, the stack it starts) runs offline.
go_offline()
patch_wait_for()  # a cancelled task stops even mid Redis command (Python 3.11: shared/wait_for.py)

app = typer.Typer(
    help="AgentCards: an MCP gateway that runs agent code in sandboxes and learns from it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)


def _mount_subcommands() -> None:
    from deploy.cli.bench import bench_app
    from deploy.cli.cache import cache_app
    from deploy.cli.capabilities import capabilities_app
    from deploy.cli.connect import connect, disconnect
    from deploy.cli.keys import audit_app, keys_app
    from deploy.cli.pii import pii_app
    from deploy.cli.policy import policy_app
    from deploy.cli.sandbox import sandbox_app
    from deploy.cli.servers import servers_app

    app.add_typer(bench_app, name="bench")
    app.add_typer(cache_app, name="cache", help="The result cache: clear, stats.")
    app.add_typer(
        capabilities_app, name="capabilities", help="Capabilities: list, show, export, import."
    )
    app.add_typer(keys_app, name="keys")
    app.command("connect")(connect)
    app.command("disconnect")(disconnect)
    app.add_typer(audit_app, name="audit")
    app.add_typer(pii_app, name="pii")
    app.add_typer(policy_app, name="policy")
    app.add_typer(sandbox_app, name="sandbox", help="Run a file in the real sandbox.")
    app.add_typer(servers_app, name="servers")


def _settings() -> Settings:
    try:
        return get_settings()
    except AgentCardsError as exc:
        _fail(exc)


def _fail(exc: BaseException) -> NoReturn:
    message = str(getattr(exc, "message", None) or exc)
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)  # one line, as written
    raise typer.Exit(code=1)


@app.command()
def up(
    timeout: float = typer.Option(
        120.0, help="seconds to wait for every process and every MCP server to be ready or failed"
    ),
) -> None:
    """Start the whole stack (embedded Postgres and Redis unless URLs are set); Ctrl-C stops it."""
    from deploy.cli.up import run_up

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = _settings()
    try:
        run_up(settings, timeout_s=timeout, console=console)
    except Exception as exc:  # everything started is stopped by now: say why in one line
        _fail(exc)


@app.command()
def status() -> None:
    """Report each process, dependency and MCP server as healthy or not, with the reason."""
    from deploy.cli.up import access_line
    from deploy.launcher.processes import read_servers, stack_specs
    from shared.db import ping

    settings = _settings()
    try:
        state, resolved = running_stack(settings)
    except AgentCardsError as exc:
        _fail(exc)
    table = Table(title=f"agentcards (supervisor pid {state.supervisor_pid})")
    for col in ("part", "pid", "health", "detail"):
        table.add_column(col)
    rows: list[tuple[str, str, bool, str]] = []
    try:
        ping(state.database_url)
        rows.append(("postgres", "-", True, "answers, pgvector installed"))
    except AgentCardsError as exc:
        rows.append(("postgres", "-", False, exc.message))
    redis_pid = state.embedded_redis_pid
    try:
        import redis

        redis.Redis.from_url(state.redis_url, socket_timeout=2).ping()
        if redis_pid and not pid_alive(redis_pid):  # a stale state file: another server answers
            rows.append(("redis", str(redis_pid), False, "embedded Redis process not running"))
        else:
            rows.append(("redis", str(redis_pid or "-"), True, "answers PING"))
    except Exception as exc:  # report, don't crash: status must always print
        rows.append(("redis", str(redis_pid or "-"), False, str(exc)))
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
        mark = "[green]healthy[/]" if ok else "[red]unhealthy[/]"
        table.add_row(name, shown_pid, mark, escape(detail))
    servers = read_servers(resolved)
    for server in servers.values():
        ready = server.state == "ready"
        mark = "[green]ready[/]" if ready else f"[red]{escape(server.state)}[/]"
        table.add_row(f"mcp {server.name}", "-", mark, escape(server.error or ""))
    console.print(table)
    for name, url in state.urls.items():
        console.print(f"  {name:<10} {url}")
    if access := access_line(resolved, state.database_url):
        console.print(f"  {'access':<10} {access}", soft_wrap=True)
    if not all(ok for _, _, ok, _ in rows) or any(s.state != "ready" for s in servers.values()):
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
def migrate(
    wait: bool = typer.Option(
        False,
        "--wait",
        help="apply nothing: wait until the database is at this release's schema "
        "(a pod's init step while the migration Job runs)",
    ),
    timeout_s: float = typer.Option(600.0, "--timeout", help="seconds --wait waits"),
) -> None:
    """Apply database migrations to AGENTCARDS_DATABASE_URL (the compose prestart step)."""
    import time

    import psycopg

    from shared.db import migrate as run_migrations
    from shared.db import schema_is_current, schema_state
    from shared.errors import DependencyError

    settings = _settings()
    if wait:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if schema_is_current(settings):
                    console.print(f"database at revision {schema_state(settings)[0]}")
                    return
            except (AgentCardsError, psycopg.Error) as exc:  # not up yet: keep waiting
                last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            else:
                current, head = schema_state(settings)
                last = f"database at revision {current or 'none'}, this release needs {head}"
            if time.monotonic() >= deadline:
                _fail(DependencyError(f"gave up after {timeout_s:g} s: {last}"))
            time.sleep(2)
    try:
        head = run_migrations(settings)
    except AgentCardsError as exc:
        _fail(exc)
    console.print(f"database at revision {head}")


@app.command()
def reembed() -> None:
    """Re-embed the stored tools, intents and capabilities with AGENTCARDS_EMBEDDING_MODEL,
    after changing it (stop the stack first; unset AGENTCARDS_DATABASE_URL: the embedded one)."""
    from deploy.launcher.embedded import EmbeddedPostgres
    from deploy.launcher.state import StackState
    from shared.db import connect
    from shared.db import migrate as run_migrations
    from shared.embeddings import get_embedder
    from shared.learning.reembed import reembed as run_reembed

    settings = _settings()
    state = StackState.load(settings.run_dir)
    if state is not None and pid_alive(state.supervisor_pid):
        _fail(AgentCardsError("a stack is running here: `agentcards down` first"))
    pg = None if settings.database_url else EmbeddedPostgres.start(settings.home / "pgdata")
    url = settings.database_url or (pg.url if pg else "")
    try:
        run_migrations(settings, url=url, check_model=False)
        embedder = get_embedder(settings)
        with connect(url) as conn:
            counts = run_reembed(
                conn, embed=embedder.embed, model=settings.embedding_model, dim=settings.vector_dim
            )
    except AgentCardsError as exc:
        _fail(exc)
    finally:
        if pg is not None:
            pg.stop()
    done = ", ".join(f"{table} {n}" for table, n in counts.items())
    console.print(f"re-embedded with {settings.embedding_model} ({settings.vector_dim}-d): {done}")


@app.command()
def mcp() -> None:
    """Serve AgentCards' MCP tools over stdio (for desktop MCP clients); needs a running stack.

    When the stack has API keys, set AGENTCARDS_API_KEY to one.
    """
    settings = _settings()
    if not (settings.database_url and settings.redis_url):  # else: a stack this home did not start
        try:
            _, settings = running_stack(settings)
        except AgentCardsError as exc:
            _fail(exc)
    import asyncio

    from services.gateway.mcp.server import serve_stdio

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(serve_stdio(settings))
    except AgentCardsError as exc:
        _fail(exc)


def _join(
    process: str,
    *,
    env: dict[str, str] | None = None,
    node_name: str | None = None,
    concurrency: int | None = None,
) -> None:
    """Check the URLs (and the MCP config), then become the process: see deploy/cli/join.py."""
    import os

    from deploy.cli.join import check_reachable, exec_process, join_argv

    os.environ.update(env or {})
    get_settings.cache_clear()
    settings = _settings()
    try:
        argv = join_argv(settings, process, node_name=node_name, concurrency=concurrency)
        check_reachable(settings)
    except AgentCardsError as exc:
        _fail(exc)
    exec_process(argv)


@app.command()
def gateway(
    host: str | None = typer.Option(None, help="bind address (default AGENTCARDS_GATEWAY_HOST)"),
    port: int | None = typer.Option(None, help="port (default AGENTCARDS_GATEWAY_PORT)"),
) -> None:
    """Serve one gateway of an existing stack (AGENTCARDS_DATABASE_URL and _REDIS_URL)."""
    env = {"AGENTCARDS_GATEWAY_HOST": host} if host else {}
    if port:
        env["AGENTCARDS_GATEWAY_PORT"] = str(port)
    _join("gateway", env=env)


@app.command()
def toolhost() -> None:
    """Serve one toolhost of an existing stack: the MCP servers of AGENTCARDS_MCP_CONFIG."""
    _join("toolhost")


@app.command()
def worker(
    kind: str = typer.Argument(..., help="sandbox (runs executions) or learning"),
    concurrency: int | None = typer.Option(
        None, help="sandbox processes (default AGENTCARDS_SANDBOX_WORKERS); learning runs one"
    ),
    name: str | None = typer.Option(
        None, help="Celery node name, unique per stack (default sandbox@HOSTNAME)"
    ),
) -> None:
    """Run one Celery worker of an existing stack (AGENTCARDS_DATABASE_URL and _REDIS_URL)."""
    if kind not in {"sandbox", "learning"}:
        _fail(ValueError(f"unknown worker {kind!r}: choose sandbox or learning"))
    _join(kind, node_name=name, concurrency=concurrency if kind == "sandbox" else None)


def main() -> None:
    """Console-script entry point."""
    # The imports' ~150k objects live as long as the process: moved out of the collector's
    # reach, no collection walks them again, nor the one at exit (0.5 CPU-s of a command).
    gc.freeze()
    app()


_mount_subcommands()


if __name__ == "__main__":
    main()
