"""`agentcards demo`: a running stack with the example server, or a temporary one, and the session."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table

from deploy.demo.session import Session, Step
from deploy.launcher.harness import temporary_stack
from deploy.launcher.state import StackState, pid_alive
from shared.config import Settings
from shared.errors import DependencyError, Unauthorized

console = Console()

# What the session's code calls; all must be available on a running stack to use it.
DEMO_TOOLS = ("example:list_files", "example:read_file", "example:fail")
# A temporary stack that stops after the session runs what the session uses: no beat (no
# step waits on a periodic task) and no Flower (nothing opens it). Each is a Python process
# importing Celery, 0.5-1.2 CPU-s at start beside the gateway's on a small machine. With
# --keep the stack is for looking around: it runs everything `agentcards up` runs.
TEMPORARY_WITHOUT = ("beat", "flower")


def example_config(folder: Path) -> Path:
    """An mcpServers file with the project's example server, run by this interpreter."""
    path = folder / "demo-mcp.json"
    server = {"command": sys.executable, "args": ["-m", "deploy.examples.example_server"]}
    path.write_text(json.dumps({"mcpServers": {"example": server}}))
    return path


@contextmanager
def demo_stack(settings: Settings, *, keep: bool = False) -> Iterator[tuple[str, Settings, bool]]:
    """(gateway URL, settings, started_here): a running stack serving the example tools, else a new one."""
    state = StackState.load(settings.run_dir)
    if state and pid_alive(state.supervisor_pid) and "gateway" in state.urls:
        url = state.urls["gateway"]
        missing = _missing_example_tools(url, settings.bearer_headers())
        if not missing:
            running = settings.model_copy(
                update={"database_url": state.database_url, "redis_url": state.redis_url}
            )
            yield url, running, False
            return
        console.print(
            f"the running stack cannot serve the demo ({missing}); starting a temporary one"
        )
    settings.home.mkdir(parents=True, exist_ok=True)
    config = example_config(settings.home)
    console.print(
        "starting a temporary stack (embedded Postgres + Redis, gateway, toolhost, workers)…"
    )
    started = time.perf_counter()
    without = () if keep else TEMPORARY_WITHOUT
    with temporary_stack(mcp_config=config, without=without) as handle:
        _wait_for_tools(handle.gateway_url)
        console.print(f"temporary stack up in {time.perf_counter() - started:.1f}s")
        # A new stack has no keys: a key from the environment would be refused there.
        yield handle.gateway_url, handle.settings.model_copy(update={"api_key": None}), True


def _missing_example_tools(url: str, headers: dict[str, str] | None = None) -> str:
    """Why the stack at ``url`` cannot run the demo's code, or "" when it can.

    Tools are checked for availability, not presence: a server dropped from the
    configuration keeps its rows (unavailable) and would fail every step. A stack that
    wants a key the demo lacks is the user's to fix, not a reason for a temporary stack.
    """
    try:
        response = httpx.get(f"{url}/v1/tools", headers=headers, timeout=5)
        if response.status_code == 401:
            raise Unauthorized(
                f"the running stack at {url} needs an API key: set AGENTCARDS_API_KEY to one "
                "(`agentcards keys create --tenant NAME` makes one)"
            )
        tools = response.json()["tools"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        return f"its gateway did not list tools: {exc}"
    available = {t["id"] for t in tools if t.get("available")}
    missing = [t for t in DEMO_TOOLS if t not in available]
    return f"no available {', '.join(missing)}" if missing else ""


def _wait_for_tools(url: str, timeout_s: float = 60) -> None:
    """The toolhost syncs tools (with embeddings) right after it connects; wait for them."""
    deadline = time.monotonic() + timeout_s
    missing = "not checked yet"
    with console.status("waiting for the example server's tools…"):
        while time.monotonic() < deadline:
            missing = _missing_example_tools(url)
            if not missing:
                return
            time.sleep(0.2)
    raise DependencyError(
        f"the example MCP server's tools were not available within {timeout_s:.0f}s: {missing}"
    )


def run_demo(settings: Settings, *, keep: bool) -> dict[str, Any]:
    """Play the session with a live display; returns the facts it gathered."""
    started = time.perf_counter()
    with demo_stack(settings, keep=keep) as (url, stack_settings, started_here):
        # Live only on a terminal, and transient: the summary below is the one table
        # left on screen (piped, a Live prints its last frame, a second copy).
        live = Live(_table([]), console=console, refresh_per_second=8, transient=True)
        if console.is_terminal:
            live.start()
        try:
            session = Session(
                gateway_url=url, settings=stack_settings, on_change=lambda s: live.update(_table(s))
            )
            facts = session.run()
        finally:
            live.stop()
        console.print(_table(session.steps, title="summary"))
        failed = [s for s in session.steps if s.status != "ok"]
        for step in failed:
            console.print(f"[red]step failed:[/] {step.title}: {step.detail}", soft_wrap=True)
        if not started_here or keep:  # a URL only while something serves it
            console.print(f"dashboard: {url}/dashboard   API docs: {url}/docs")
        else:
            console.print(
                "the temporary stack stops now; to look around after the session, run "
                "`agentcards demo --keep`, or `agentcards up` and then `agentcards demo`"
            )
        if started_here and keep:
            console.print("the temporary stack keeps running; Ctrl-C stops it")
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
        facts["failed_steps"] = [s.title for s in failed]
        stopping = time.perf_counter()
    if started_here:
        console.print(f"temporary stack stopped in {time.perf_counter() - stopping:.1f}s")
    console.print(f"demo took {time.perf_counter() - started:.1f}s")
    return facts


def _table(steps: list[Step], *, title: str = "agentcards demo") -> Table:
    table = Table(title=title, expand=True)
    table.add_column("step", no_wrap=True)
    table.add_column("", width=7)
    table.add_column("what happened")
    table.add_column("s", justify="right", width=5)
    marks = {"ok": "[green]ok[/]", "failed": "[red]failed[/]", "running": "[yellow]…[/]"}
    for step in steps:
        table.add_row(
            step.title,
            marks.get(step.status, ""),
            step.detail,
            f"{step.seconds:.1f}" if step.seconds else "",
        )
    return table
