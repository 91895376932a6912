"""MCP `search_tools` latency on a stack with five published servers, queries it has not seen.

    python -m research.search.mcp_latency [--compare REF] [--first 5]

A stack of this checkout (and, with ``--compare``, one of REF, both up at once) with the
servers of `bench footprint` (`deploy/bench/footprint.py`); once each has synced its tools,
one SDK client session per stack (2025-11-25, streamable HTTP, no key: the loopback default)
asks the real-server requests, each query once per stack (the gateway caches repeated
ones), alternating which stack goes first. The first ``--first`` queries after the stack is
up are reported apart (``first_ms``). Per stack: p50/p90 of the rest, the gateway's CPU
time per search (read around each call, the load-insensitive figure), the text content's
size (bytes) and the client's own output-schema check of one result
(``validate_ms``, timed apart by calling the SDK's `validate_tool_result` again).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema  # noqa: F401  # imported by the SDK at its first check: not in a stack's first query
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.bench.footprint import five_servers, percentiles, queries
from deploy.bench.held import HeldStack, checkout, held_stack
from deploy.launcher.state import StackState
from shared.db import connect

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 5


def wait_tools(database_url: str, *, servers: int, timeout_s: float = 240.0) -> float:
    """Seconds until every server has an available tool row (search finds nothing before)."""
    started = time.monotonic()
    with connect(database_url, autocommit=True) as conn:
        while time.monotonic() - started < timeout_s:
            row = conn.execute(
                "SELECT count(DISTINCT server) AS n FROM tools WHERE available"
            ).fetchone()
            if row and row["n"] >= servers:
                return time.monotonic() - started
            time.sleep(0.1)
    raise RuntimeError(f"{servers} servers were not synced within {timeout_s:g}s")


@contextlib.asynccontextmanager
async def session_at(url: str) -> AsyncIterator[ClientSession]:
    async with (
        create_mcp_http_client() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()  # the SDK reads output schemas here; not timed
        yield session


def gateway(stack: HeldStack) -> psutil.Process:
    state = StackState.load(stack.run_dir)
    if state is None:
        raise RuntimeError(f"no stack state in {stack.run_dir}")
    return psutil.Process(state.processes["gateway"])


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def search(session: ClientSession, query: str) -> tuple[float, int, float]:
    """One `search_tools` call: its ms, its text's size, the client's schema check's ms."""
    started = time.perf_counter()
    result = await session.call_tool("search_tools", {"query": query, "limit": LIMIT})
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"search_tools failed: {result.content}")
    size = sum(len(getattr(block, "text", "")) for block in result.content)
    began = time.perf_counter()
    await session.validate_tool_result("search_tools", result)
    return elapsed, size, (time.perf_counter() - began) * 1000


async def measure(stacks: dict[str, HeldStack], *, first: int) -> dict[str, Any]:
    texts = queries()
    out: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as exits:
        sessions = {
            name: await exits.enter_async_context(session_at(f"{s.gateway_url}/mcp"))
            for name, s in stacks.items()
        }
        gateways = {name: gateway(s) for name, s in stacks.items()}
        cpu: dict[str, float] = {name: 0.0 for name in stacks}
        times: dict[str, list[float]] = {name: [] for name in stacks}
        sizes: dict[str, list[int]] = {name: [] for name in stacks}
        checks: dict[str, list[float]] = {name: [] for name in stacks}
        for i, text in enumerate(texts):
            order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
            for name in order:
                before = cpu_s(gateways[name]) if i >= first else 0.0
                ms, size, check = await search(sessions[name], text)
                if i >= first:
                    cpu[name] += cpu_s(gateways[name]) - before
                times[name].append(ms)
                sizes[name].append(size)
                checks[name].append(check)
        for name in stacks:
            out[name] = {
                "first_ms": [round(t, 1) for t in times[name][:first]],
                "search_ms": percentiles(times[name][first:]),
                "gateway_cpu_ms_per_search": round(cpu[name] / (len(texts) - first) * 1000, 2),
                "text_bytes_p50": statistics.median(sizes[name]),
                "validate_ms_p50": round(statistics.median(checks[name]), 2),
            }
    return out


def run(compare: str | None, first: int) -> dict[str, Any]:
    out: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="agentcards-mcpsearch-") as tmp:
        servers, missing = five_servers(Path(tmp))
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        out["servers"], out["missing_servers"] = sorted(servers), missing
        with contextlib.ExitStack() as exits:
            roots = {"new": ROOT}
            if compare:
                roots = {"old": exits.enter_context(checkout(compare)), **roots}
            stacks = {
                name: exits.enter_context(held_stack(root, config, name=name, timeout_s=240))
                for name, root in roots.items()
            }
            for name, stack in stacks.items():
                out[f"{name}_sync_s"] = round(
                    wait_tools(stack.database_url, servers=len(servers)), 1
                )
            out |= asyncio.run(measure(stacks, first=first))
    out["load_avg_end"] = os.getloadavg()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--compare", default=None, help="a git ref or a checkout's directory")
    parser.add_argument("--first", type=int, default=5, help="queries reported apart")
    args = parser.parse_args()
    print(json.dumps(run(args.compare, args.first), indent=2))


if __name__ == "__main__":
    main()
