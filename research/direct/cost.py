"""What one direct call costs, in load-insensitive terms:
``python -m research.direct.cost [N] [--sessions S] [--monitor FILE]``.

A temporary stack with the time server (as ``bench direct`` runs it); one MCP SDK session
makes ``N`` sequential ``tools/call`` through ``/mcp/servers/time`` (``--sessions S``: S
sessions at once, ``N`` calls in all, as ``bench direct``'s throughput figure loads it). Measured around those
calls (after a warm-up, then a few seconds for learning to settle), minus what the same
stack does in an idle window of the same length: CPU-seconds per call of each process
(with its children: Celery's pool, the toolhost's stdio server, Postgres backends; the
toolhost's stdio servers also apart, as ``toolhost's servers``), Redis
commands per call by name (``INFO commandstats``), and Postgres transactions and rows per
call (``pg_stat_database``). CPU time is what a process spent, whatever else runs on the
machine; wall times here are not the point. Then the same calls through the FastMCP proxy
(``bench direct``'s, on its own time server), its process's CPU per call beside ours (the
gateway, the toolhost without its server, Redis and Postgres), idle not subtracted (it has
no background work). Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import redis

from deploy.bench.direct import ARGS, TOOL, _http_session, _write_config, fastmcp_proxy, venv_python
from deploy.launcher.harness import StackHandle
from research.direct.stack import time_stack
from shared.db import connect

WARMUP = 20
SETTLE_S = 4.0
PG_COUNTERS = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted",
               "tup_fetched")  # fmt: skip


def _processes(handle: StackHandle) -> dict[str, psutil.Process]:
    found = {
        child.spec.name: psutil.Process(child.proc.pid)
        for child in handle.stack.children
        if child.proc is not None
    }
    if handle.stack.redis is not None:
        found["redis"] = psutil.Process(handle.stack.redis.process.pid)
    if handle.stack.pg is not None and handle.stack.pg.pid() is not None:
        found["postgres"] = psutil.Process(handle.stack.pg.pid())
    return found


def _cpu(processes: dict[str, psutil.Process]) -> dict[str, float]:
    """CPU-seconds so far of each process and its live descendants (children that exited
    and were reaped count in the parent's ``children_*`` times)."""
    out: dict[str, float] = {}
    for name, proc in processes.items():
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            # children_*: its reaped children (a Celery pool process, a consolidation pass)
            total += t.user + t.system + t.children_user + t.children_system
            if name == "toolhost" and p is not proc:  # its stdio servers, also apart
                out["toolhost's servers"] = out.get("toolhost's servers", 0.0) + t.user + t.system
        out[name] = total
    return out


def _redis(client: redis.Redis) -> Counter[str]:
    stats = client.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})


def _pg(database_url: str) -> dict[str, int]:
    with connect(database_url) as conn:
        row = conn.execute(
            f"SELECT {', '.join(PG_COUNTERS)} FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return {k: int(row[k]) for k in PG_COUNTERS}


def _snapshot(
    processes: dict[str, psutil.Process], client: redis.Redis, database_url: str
) -> dict[str, Any]:
    time.sleep(0.6)  # pg_stat counters are flushed by backends at most every 0.5 s (idle)
    return {"cpu": _cpu(processes), "redis": _redis(client), "pg": _pg(database_url),
            "at": time.monotonic()}  # fmt: skip


def _delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {
        "cpu": {k: b["cpu"][k] - a["cpu"][k] for k in a["cpu"]},
        "redis": b["redis"] - a["redis"],
        "pg": {k: b["pg"][k] - a["pg"][k] for k in a["pg"]},
        "s": b["at"] - a["at"],
    }


def main(n: int = 300, sessions_n: int = 1) -> dict[str, Any]:
    logging.disable(logging.INFO)  # the launcher's and the client's per-request lines
    with time_stack() as ours:
        handle, url, headers = ours.handle, ours.url, ours.headers
        database_url = handle.settings.database_url or ""
        client = redis.Redis.from_url(handle.settings.redis_url or "")
        processes = _processes(handle)
        url_redis = handle.settings.redis_url or ""
        # The client's own INFO/SELECT and our pg_stat query show in the deltas; the idle
        # window has them too, so they cancel.

        async def calls() -> float:
            async with contextlib.AsyncExitStack() as stack:
                sessions = [
                    await stack.enter_async_context(_http_session(url, headers))
                    for _ in range(sessions_n)
                ]
                for session in sessions:
                    for _ in range(WARMUP // sessions_n + 1):
                        await session.call_tool(TOOL, ARGS)
                time.sleep(SETTLE_S)
                before = time.monotonic()
                global _busy_before
                _busy_before = _snapshot(processes, client, database_url)
                left = n

                async def loop(session: Any) -> None:
                    nonlocal left
                    while left > 0:
                        left -= 1
                        result = await session.call_tool(TOOL, ARGS)
                        if result.is_error:
                            raise RuntimeError(result.content)

                await asyncio.gather(*(loop(s) for s in sessions))
                elapsed = time.monotonic() - before
                return elapsed

        asyncio.run(calls())
        time.sleep(SETTLE_S)
        busy = _delta(_busy_before, _snapshot(processes, client, database_url))
        idle_before = _snapshot(processes, client, database_url)
        time.sleep(busy["s"] - 0.6)
        idle = _delta(idle_before, _snapshot(processes, client, database_url))
        if MONITOR:

            async def watched() -> None:
                async with _http_session(url, headers) as session:
                    await session.call_tool(TOOL, ARGS)
                    await _monitor(redis.Redis.from_url(url_redis), session)

            asyncio.run(watched())
    scale = busy["s"] / idle["s"]
    cpu = {k: round((v - idle["cpu"][k] * scale) / n * 1000, 2) for k, v in busy["cpu"].items()}
    cmds = {
        k: round((busy["redis"][k] - idle["redis"].get(k, 0) * scale) / n, 2) for k in busy["redis"]
    }
    cmds = {k: v for k, v in sorted(cmds.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.05}
    pg = {k: round((v - idle["pg"][k] * scale) / n, 2) for k, v in busy["pg"].items()}
    proxy = _proxy_cost(n, sessions_n)
    ours_own = cpu["gateway"] + cpu["toolhost"] - cpu.get("toolhost's servers", 0.0)
    ours_own += cpu.get("redis", 0.0) + cpu.get("postgres", 0.0)
    return {
        "n": n,
        "sessions": sessions_n,
        "window_s": round(busy["s"], 1),
        "cpu_ms_per_call": dict(sorted(cpu.items(), key=lambda kv: -kv[1])),
        "cpu_ms_per_call_total": round(sum(v for k, v in cpu.items() if k in processes), 2),
        "redis_cmds_per_call": round(sum(cmds.values()), 2),
        "redis_by_command": cmds,
        "pg_per_call": pg,
        "idle_cpu_ms_per_s": {k: round(v / idle["s"] * 1000, 1) for k, v in idle["cpu"].items()},
        "fastmcp_proxy_cpu_ms_per_call": proxy,
        "ours_without_servers_over_proxy_cpu": round(ours_own / proxy["proxy"], 2),
    }


def _proxy_cost(n: int, sessions_n: int) -> dict[str, float]:
    """CPU-ms per call of the FastMCP proxy's process and of its time server, over ``n``
    calls by ``sessions_n`` sessions (after the same warm-up)."""
    with tempfile.TemporaryDirectory(prefix="agentcards-cost-") as tmp:
        config = _write_config(Path(tmp) / "mcp.json", venv_python(), only_time=True)
        with fastmcp_proxy(config) as url:
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            (pid,) = {c.pid for c in psutil.net_connections("tcp")
                      if c.laddr and c.laddr.port == port and c.status == "LISTEN"}  # fmt: skip
            proxy = psutil.Process(pid)

            def used() -> tuple[float, float]:
                own = proxy.cpu_times()
                server = sum(sum(c.cpu_times()[:2]) for c in proxy.children(recursive=True))
                return own.user + own.system, server

            async def calls() -> tuple[float, float]:
                async with contextlib.AsyncExitStack() as stack:
                    sessions = [
                        await stack.enter_async_context(_http_session(url, {}))
                        for _ in range(sessions_n)
                    ]
                    for session in sessions:
                        for _ in range(WARMUP // sessions_n + 1):
                            await session.call_tool(TOOL, ARGS)
                    before, left = used(), n

                    async def loop(session: Any) -> None:
                        nonlocal left
                        while left > 0:
                            left -= 1
                            await session.call_tool(TOOL, ARGS)

                    await asyncio.gather(*(loop(s) for s in sessions))
                    after = used()
                    return after[0] - before[0], after[1] - before[1]

            own, server = asyncio.run(calls())
    return {"proxy": round(own / n * 1000, 2), "proxy's server": round(server / n * 1000, 2)}


_busy_before: dict[str, Any] = {}
MONITOR: Path | None = None


async def _monitor(client: redis.Redis, session: Any) -> None:
    """Every Redis command of 3 calls and of the next ``SETTLE_S`` seconds, to ``MONITOR``."""
    lines: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        with client.monitor() as m:
            for command in m.listen():
                lines.append(f"{command['time']:.4f} {command['client_address']}:"
                             f"{command['client_port']} {command['command'][:200]}")  # fmt: skip
                if stop.is_set():
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    await asyncio.sleep(0.5)
    for _ in range(3):
        lines.append(f"--- call at {time.time():.4f}")
        await session.call_tool(TOOL, ARGS)
    await asyncio.sleep(SETTLE_S)
    stop.set()
    client.ping()
    thread.join(timeout=5)
    assert MONITOR is not None
    MONITOR.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m research.direct.cost")
    parser.add_argument("n", type=int, nargs="?", default=300, help="calls measured")
    parser.add_argument("--sessions", type=int, default=1, help="sessions calling at once")
    parser.add_argument("--monitor", type=Path, help="every Redis command of 3 calls, to FILE")
    options = parser.parse_args()
    MONITOR = options.monitor
    print(json.dumps(main(options.n, options.sessions), indent=2))
