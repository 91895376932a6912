"""`agentcards bench e2e`: POST /v1/executions?wait=true end to end, beside a no-op Celery round trip.

Each configuration runs a whole temporary stack (embedded Postgres and Redis, toolhost
serving `bench:echo` over stdio (deploy/bench/echo_server.py), sandbox workers, learning
worker, gateway).
Latency is measured one request at a time; throughput with as many concurrent clients
as there are sandbox worker processes.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from deploy.bench.echo_server import write_config
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.broker import make_celery
from shared.db import connect
from shared.executions.status import ExecutionStatus
from shared.queues import Queue, TaskName

TOOL = "bench:echo"
CODE = "return await mcp.bench.echo(n=args['n'])"
WARMUP = 10


def run(n: int = 200) -> dict[str, Any]:
    """Latency (1 client) and throughput (k clients) with k = 1 and 2 sandbox worker processes."""
    results: dict[str, Any] = {"n": n, "code": CODE, "configurations": []}
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        # Never cached: the same submissions repeat, and each must be a run.
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        for workers in (1, 2):
            with temporary_stack(mcp_config=config, sandbox_workers=workers) as handle:
                if workers == 1:
                    results["baseline_celery_noop"] = _celery_noop(handle, n=n)
                results["configurations"].append(_measure(handle, n=n, workers=workers))
    one = results["configurations"][0]
    results["ratio_p50_vs_celery_noop"] = round(
        one["latency_ms"]["p50"] / results["baseline_celery_noop"]["p50"], 2
    )
    results["target"] = {"p50_ms": 30}
    return results


def wait_synced(handle: StackHandle, tool: str = TOOL, *, timeout_s: float = 120.0) -> None:
    """Wait until ``tool``'s row exists: a server counts as ready as soon as it serves calls,
    while its tools' sync may still wait seconds for the embedding model, and a submission
    may only name tools that Postgres knows."""
    deadline = time.monotonic() + timeout_s
    with connect(handle.settings.database_url or "", autocommit=True) as conn:
        while time.monotonic() < deadline:
            query = "SELECT 1 FROM tools WHERE id = %s AND available"
            if conn.execute(query, (tool,)).fetchone():
                return
            time.sleep(0.2)
    raise RuntimeError(f"{tool} was not synced within {timeout_s:g}s")


def _measure(handle: StackHandle, *, n: int, workers: int) -> dict[str, Any]:
    wait_synced(handle)
    with httpx.Client(base_url=handle.gateway_url, timeout=60) as client:
        for i in range(WARMUP):
            _submit(client, i)
        latencies = [_timed(client, i) for i in range(n)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers * 2) as pool:
        clients = [
            httpx.Client(base_url=handle.gateway_url, timeout=60) for _ in range(workers * 2)
        ]
        list(pool.map(lambda i: _submit(clients[i % len(clients)], i), range(n)))
        for c in clients:
            c.close()
    elapsed = time.perf_counter() - started
    return {
        "sandbox_workers": workers,
        "latency_ms": _stats(latencies),
        "throughput_per_s": round(n / elapsed, 1),
    }


def measure_latency(handle: StackHandle, *, n: int) -> dict[str, float]:
    """Latency stats of ``n`` sequential one-tool executions (after the warm-up)."""
    wait_synced(handle)
    with httpx.Client(base_url=handle.gateway_url, timeout=60) as client:
        for i in range(WARMUP):
            _submit(client, i)
        return _stats([_timed(client, i) for i in range(n)])


def _submit(client: httpx.Client, i: int) -> dict[str, Any]:
    response = client.post(
        "/v1/executions", params={"wait": "true"}, json={"code": CODE, "args": {"n": i}}
    )
    body: dict[str, Any] = response.json()
    if body.get("status") != ExecutionStatus.SUCCEEDED or body.get("result") != {"n": i}:
        raise RuntimeError(f"bench execution failed: {body}")
    return body


def _timed(client: httpx.Client, i: int) -> float:
    started = time.perf_counter()
    _submit(client, i)
    return (time.perf_counter() - started) * 1000


def _celery_noop(handle: StackHandle, *, n: int) -> dict[str, Any]:
    """Round trip of a task that does nothing, on the learning worker (same broker, same host)."""
    app = make_celery("bench", settings=handle.settings)
    try:
        for _ in range(WARMUP):
            app.send_task(TaskName.PING, queue=Queue.MAINTENANCE).get(timeout=10)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            app.send_task(TaskName.PING, queue=Queue.MAINTENANCE).get(timeout=10)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        app.close()
    return _stats(samples)


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }
