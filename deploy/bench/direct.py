"""`agentcards bench direct`: a direct ``tools/call`` through the gateway, beside the same server
with no gateway and behind the FastMCP proxy, in one run.

One stdio server for everyone: PyPI ``mcp-server-time`` (``get_current_time``, whose results
the gateway is told never to cache), pinned and installed with the pinned
FastMCP (``fastmcp==4.1.6``, not a dependency of AgentCards) into a venv under
``~/.cache/agentcards``. Every client is the official MCP Python SDK's, over streamable HTTP
(over stdio for the floor). Measured:

- ``sequential``: one session per path, one call at a time, the paths alternating call by
  call (load drifts hit every path alike), in a new order each round
  (``deploy/bench/order.py``: in a fixed order ``/mcp/servers/time`` always came right after
  the FastMCP proxy's call, and paid for what that process did after answering): the server
  over stdio (``floor``), the FastMCP proxy (``fastmcp run`` on an ``mcpServers`` file),
  ``/mcp/servers/time``, ``/mcp/servers`` and ``/mcp`` in direct mode, with an API key and
  the privacy layer on
  (the defaults: tokenise); and ``/mcp/servers/time`` by a client that declared MCP Tasks
  (``servers_time_tasks``: each call a task's call, its row written at its start and its
  end by the toolhost, answered within the grace: docs/mcp.md, "Direct calls as tasks").
- ``concurrent``: ``SESSIONS`` sessions calling at once for ``seconds``: calls per second.
- ``long_call``: on ``/mcp/servers``, one session calls ``pause``
  (``deploy/bench/pause_server.py``) for ``LONG_CALL_S`` while the others keep calling
  ``get_current_time``: their latency then, beside the same sessions' latency over the same
  time just before, with no long call (``without_long_call``): the ratio of their p50s says
  what the long call costs the others (1.0: nothing; their latency is the machine's
  throughput shared among them).

The machine may be noisy: read medians and the ratios of one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client.extension import ClientExtension
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.bench.e2e import ORDER_SEED, WARMUP, _stats, wait_synced
from deploy.bench.order import rounds
from deploy.launcher.harness import temporary_stack
from shared.auth.store import issue_key
from shared.db import connect
from shared.rpc.upstream import TASKS_EXTENSION
from shared.runtime import freeze_long_lived

FASTMCP = "fastmcp==4.1.6"
TIME_SERVER = "mcp-server-time==2026.10.19"
VENV = Path.home() / ".cache" / "agentcards" / "bench-direct-fastmcp-4.1.6"
ROOT = Path(__file__).resolve().parents[2]
TOOL, ARGS = "get_current_time", {"timezone": "UTC"}
SESSIONS = 8
LONG_CALL_S = 5.0

Call = Callable[[], Awaitable[types.CallToolResult]]


def run(n: int = 300, seconds: float = 5.0) -> dict[str, Any]:
    """Latencies (ms) of ``n`` sequential calls per path, throughput of ``SESSIONS`` sessions
    over ``seconds``, and the other sessions' latency during a long call."""
    python = venv_python()
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        # The proxy serves the time server alone: FastMCP proxies one server over a kept
        # session, and several by a new session (a new server process) per call.
        config = _write_config(Path(tmp) / "mcp.json", python, only_time=True)
        ours = _write_config(Path(tmp) / "agentcards.json", python, agentcards=True)
        with (
            temporary_stack(mcp_config=ours, sandbox_workers=1) as handle,
            fastmcp_proxy(config) as proxy_url,
        ):
            database_url = handle.settings.database_url or ""
            wait_synced(database_url, f"time:{TOOL}")
            wait_synced(database_url, "pause:pause")
            headers = {"Authorization": f"Bearer {_key(database_url)}"}
            gateway = handle.gateway_url
            result = asyncio.run(
                _measure(
                    python=python,
                    proxy=proxy_url,
                    gateway=gateway,
                    headers=headers,
                    n=n,
                    seconds=seconds,
                )
            )
            result["privacy"] = handle.settings.pii
    result.update({"n": n, "server": TIME_SERVER, "proxy": FASTMCP, "tool": TOOL})
    return result


async def _measure(
    *, python: Path, proxy: str, gateway: str, headers: dict[str, str], n: int, seconds: float
) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        sessions = {
            "floor": await stack.enter_async_context(_stdio_session(python)),
            "fastmcp": await stack.enter_async_context(_http_session(proxy, {})),
            "servers_time": await stack.enter_async_context(
                _http_session(f"{gateway}/mcp/servers/time", headers)
            ),
            "servers": await stack.enter_async_context(
                _http_session(f"{gateway}/mcp/servers", headers)
            ),
            "mcp_direct": await stack.enter_async_context(_http_session(f"{gateway}/mcp", headers)),
            "servers_time_tasks": await stack.enter_async_context(
                _tasks_session(f"{gateway}/mcp/servers/time", headers)
            ),
        }
        calls: dict[str, Call] = {
            path: _caller(session, await _name(session, TOOL), ARGS, checked=path not in {"floor", "fastmcp"})
            for path, session in sessions.items()
        }  # fmt: skip
        # The bench's own full collections would stall every path it times (~150 ms each).
        freeze_long_lived("bench client")
        samples: dict[str, list[float]] = {path: [] for path in calls}
        after: dict[str, dict[str, list[float]]] = {path: {} for path in calls}
        previous = None
        for i, paths in enumerate(rounds(list(calls), WARMUP + n, seed=ORDER_SEED)):
            for path in paths:  # a new order each round: each path follows each other as often
                started = time.perf_counter()
                await calls[path]()
                ms = (time.perf_counter() - started) * 1000
                if i >= WARMUP:
                    samples[path].append(ms)
                    if previous is not None:
                        after[path].setdefault(previous, []).append(ms)
                previous = path
    sequential = {path: _stats(values) for path, values in samples.items()}
    floor, proxy_p50 = sequential["floor"]["p50"], sequential["fastmcp"]["p50"]
    ours = sequential["servers_time"]
    concurrent = {
        "floor": await _throughput(lambda: _stdio_session(python), TOOL, seconds),
        "fastmcp": await _throughput(lambda: _http_session(proxy, {}), TOOL, seconds),
        "servers_time": await _throughput(
            lambda: _http_session(f"{gateway}/mcp/servers/time", headers), TOOL, seconds
        ),
    }
    long_call = await _during_long_call(lambda: _http_session(f"{gateway}/mcp/servers", headers))
    return {
        "sequential_ms": sequential,
        "ratios": {
            "servers_time_p50_over_fastmcp_p50": round(ours["p50"] / proxy_p50, 2),
            "servers_time_p99_over_its_p50": round(ours["p99"] / ours["p50"], 2),
            "servers_p50_over_fastmcp_p50": round(sequential["servers"]["p50"] / proxy_p50, 2),
            "mcp_direct_p50_over_fastmcp_p50": round(
                sequential["mcp_direct"]["p50"] / proxy_p50, 2
            ),
            "fastmcp_p50_over_floor_p50": round(proxy_p50 / floor, 2),
            "servers_time_tasks_p50_over_servers_time_p50": round(
                sequential["servers_time_tasks"]["p50"] / ours["p50"], 2
            ),
        },
        "overhead_over_floor_ms": {
            path: round(stats["p50"] - floor, 2) for path, stats in sequential.items()
        },
        # Each path's p50 by the path sampled just before it (what the one before left behind).
        "after_ms": {
            path: {before: round(statistics.median(v), 2) for before, v in sorted(by.items())}
            for path, by in after.items()
        },
        "concurrent": {
            "sessions": SESSIONS,
            "seconds": seconds,
            "calls_per_s": concurrent,
            "servers_time_over_fastmcp": round(
                concurrent["servers_time"] / concurrent["fastmcp"], 2
            ),
        },
        "long_call": {"seconds": LONG_CALL_S, "path": "servers", **long_call},
    }


async def _name(session: ClientSession, tool: str) -> str:
    """``tool``'s name where ``session`` lists it: its own, or with its server's name before
    it (``time.get_current_time`` on the gateway's aggregate, ``time_get_current_time`` on
    FastMCP's proxy of several servers)."""
    listed = [t.name for t in (await session.list_tools()).tools]
    for name in listed:
        if name == tool or name.endswith((f".{tool}", f"_{tool}")):
            return name
    raise RuntimeError(f"no tool {tool} among {listed}")


def _caller(session: ClientSession, name: str, args: dict[str, Any], *, checked: bool) -> Call:
    """One call of ``name``; a failed one, or (``checked``) one the cache answered, stops the
    bench: its numbers would not be the path's."""

    async def call() -> types.CallToolResult:
        result = await session.call_tool(name, args)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
        if checked and (result.meta or {}).get("agentcards/cache_hit"):
            raise RuntimeError(f"{name} was answered from the cache: {result.meta}")
        return result

    return call


async def _throughput(
    open_session: Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]],
    tool: str,
    seconds: float,
) -> float:
    """Calls per second of ``SESSIONS`` sessions calling ``name`` back to back for ``seconds``."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(open_session()) for _ in range(SESSIONS)]
        name = await _name(sessions[0], tool)
        for session in sessions:  # warm
            await _caller(session, name, ARGS, checked=False)()
        done = 0
        deadline = time.monotonic() + seconds

        async def loop(session: ClientSession) -> None:
            nonlocal done
            call = _caller(session, name, ARGS, checked=False)
            while time.monotonic() < deadline:
                await call()
                done += 1

        started = time.monotonic()
        await asyncio.gather(*(loop(session) for session in sessions))
        return round(done / (time.monotonic() - started), 1)


async def _during_long_call(
    open_session: Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]],
) -> dict[str, Any]:
    """The latency of the other sessions' calls while one session's ``pause`` call runs, and
    theirs over as long just before, with no long call."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(open_session()) for _ in range(SESSIONS)]
        pause, name = await _name(sessions[0], "pause"), await _name(sessions[0], TOOL)

        async def others(until: asyncio.Future[Any]) -> list[float]:
            samples: list[float] = []

            async def loop(session: ClientSession) -> None:
                call = _caller(session, name, ARGS, checked=False)
                while not until.done():
                    began = time.perf_counter()
                    await call()
                    samples.append((time.perf_counter() - began) * 1000)

            await asyncio.gather(*(loop(session) for session in sessions[1:]))
            return samples

        alone = await others(asyncio.ensure_future(asyncio.sleep(LONG_CALL_S)))
        long_call = asyncio.ensure_future(sessions[0].call_tool(pause, {"seconds": LONG_CALL_S}))
        started = time.monotonic()
        samples = await others(long_call)
        paused = await long_call
        if paused.is_error:
            raise RuntimeError(f"{pause} failed: {paused.content}")
        during, before = _stats(samples), _stats(alone)
        return {
            "long_call_s": round(time.monotonic() - started, 2),
            "other_calls": len(samples),
            "other_calls_ms": during,
            "other_calls_max_ms": round(max(samples), 2),
            "without_long_call": {
                "other_calls": len(alone),
                "other_calls_ms": before,
                "other_calls_max_ms": round(max(alone), 2),
            },
            "other_calls_p50_over_without": round(during["p50"] / before["p50"], 2),
        }


@contextlib.asynccontextmanager
async def _http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class _Tasks(ClientExtension):
    """MCP Tasks declared, no task result claimed: a call that outlasted the grace would
    answer a task, which the client refuses (the bench stops: not the path's number)."""

    identifier = TASKS_EXTENSION


@contextlib.asynccontextmanager
async def _tasks_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """A 2026-07-28 session at ``url`` declaring MCP Tasks (its calls are tasks' calls)."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), extensions=[_Tasks()]) as client,
    ):
        yield client.session


@contextlib.asynccontextmanager
async def _stdio_session(python: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(python), args=_time_args())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _time_args() -> list[str]:
    return ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def _write_config(
    path: Path, python: Path, *, agentcards: bool = False, only_time: bool = False
) -> Path:
    """An ``mcpServers`` file: the time server (from the bench's venv) and, unless
    ``only_time``, the pause server (from this checkout); for the gateway (``agentcards``),
    the time server's results are never cached (its tool is read-only: a repeated call
    would be a cache hit)."""
    time_server: dict[str, Any] = {"command": str(python), "args": _time_args()}
    if agentcards:
        time_server["agentcards"] = {"cache": {"ttl_s": 0}}
    servers = {
        "time": time_server,
        "pause": {
            "command": sys.executable,
            "args": ["-m", "deploy.bench.pause_server"],
            "cwd": str(ROOT),
        },
    }
    if only_time:
        del servers["pause"]
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _key(database_url: str) -> str:
    """An API key of the default tenant whose ``/mcp`` serves the servers' tools directly."""
    with connect(database_url) as conn:
        _, key = issue_key(conn, tenant_id="default", name="bench-direct", mcp_mode="direct")
        conn.commit()
    return key


def venv_python() -> Path:
    """The bench venv's interpreter, with FastMCP and the time server installed (pinned)."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    wanted = f"{FASTMCP} {TIME_SERVER}"
    if marker.exists() and marker.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", FASTMCP, TIME_SERVER],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    marker.write_text(wanted)
    return python


@contextlib.contextmanager
def fastmcp_proxy(config: Path) -> Iterator[str]:
    """``fastmcp run`` on the ``mcpServers`` file over streamable HTTP; its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [str(VENV / "bin" / "fastmcp"), "run", str(config), "--transport", "http",
         "--port", str(port), "--no-banner", "--log-level", "WARNING"],
        cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "FASTMCP_SHOW_CLI_BANNER": "false"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_listening(port, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"fastmcp run exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            return
        time.sleep(0.2)
    raise RuntimeError("the FastMCP proxy did not listen in time")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
