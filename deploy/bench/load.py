"""`agentcards bench load`: the highest submission rate one stack holds, and how workers scale.

One temporary stack (embedded Postgres and Redis, the example MCP server over stdio):

1. I/O-bound throughput: closed-loop clients run code whose one tool call waits 50 ms,
   with 1 sandbox worker process, then 2 (the pool grown in place), then 2 + 2 on a
   second "host" (`agentcards worker sandbox` with its own home, only the URLs shared),
   then 3 and 4 processes on the first host: ``scaling`` gives each count's rate beside
   linear (``k`` times one process's).
2. Rate: open-loop submissions (``POST /v1/executions?wait=true``, one quick tool call
   each) at rising rates; a rate holds when nothing fails and the backlog drains within
   ``DRAIN_S`` of the last submission. The highest one then runs for ``seconds``.
3. Where the time goes (deploy/bench/load_phases.py), from the stored timestamps.

Every ratio is measured within this one run, so other load on the machine hits both
sides; the machine's load average is reported beside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import redis

from deploy.bench.e2e import WARMUP, _stats
from deploy.bench.load_phases import phase_breakdown
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.broker import make_celery
from shared.db import connect
from shared.executions.liveness import SANDBOX_PATTERN
from shared.rpc.heartbeat import read_heartbeats

IO_CODE = "await mcp.example.slow(seconds=0.05)\nreturn args['n']"
RATE_CODE = "return await mcp.example.add(a=args['n'], b=1)"
DRAIN_S = 2.0  # a held rate answers its last request within this of the last submission
FIRST_RATE = 5.0
MIN_RATE = 0.5
FINAL_TRIES = 3
MAX_RATE = 640.0


def run(
    seconds: int = 60, io_seconds: int = 15, probe_seconds: int = 8, sequential: int = 200
) -> dict[str, Any]:
    """One client's latency and phases, the best held rate, and 1 vs 2 vs 2+2 workers."""
    home = Path(tempfile.mkdtemp(prefix="agentcards-load-"))
    config = home / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "deploy.examples.example_server"]}
    config.write_text(json.dumps({"mcpServers": {"example": server}}))
    out: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    with temporary_stack(mcp_config=config, sandbox_workers=1) as handle:
        io: dict[str, Any] = {"workload": "one tool call that waits 50 ms", "seconds": io_seconds}
        out["sequential"] = _sequential(handle, n=sequential)
        io["one_process"] = _closed_loop(handle, processes=1, seconds=io_seconds)
        _grow_pool(handle, total=2)
        io["two_processes"] = _closed_loop(handle, processes=2, seconds=io_seconds)
        out["rate"] = _rate_search(handle, probe_seconds=probe_seconds, seconds=seconds)
        with _second_host(handle, home / "host-b", concurrency=2):
            io["two_hosts_four_processes"] = _closed_loop(handle, processes=4, seconds=io_seconds)
        scaling = [io["one_process"], io["two_processes"]]
        _wait_processes(handle, 2, at_most=True)  # the second host's beats are gone
        for total in (3, 4):
            _grow_pool(handle, total=total)
            scaling.append(_closed_loop(handle, processes=total, seconds=io_seconds))
        io["scaling"] = _scaling(scaling)
        one, two = io["one_process"]["per_s"], io["two_processes"]["per_s"]
        io["ratio_two_vs_one"] = round(two / one, 2)
        io["ratio_two_hosts_vs_one_host"] = round(io["two_hosts_four_processes"]["per_s"] / two, 2)
        io["target_ratio"] = 1.8
        out["io_bound"] = io
    out["load_avg_end"] = os.getloadavg()
    return out


def _closed_loop(handle: StackHandle, *, processes: int, seconds: float) -> dict[str, Any]:
    """Two clients per sandbox process, each submitting the next run when one answers."""
    clients = 2 * processes
    deadline = time.monotonic() + seconds
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients

    def client(k: int) -> None:
        with httpx.Client(base_url=handle.gateway_url, timeout=60) as http:
            n = 0
            while time.monotonic() < deadline:
                started = time.perf_counter()
                body = _post(http, IO_CODE, {"n": f"{k}-{n}"})
                if body.get("status") == "succeeded":
                    latencies[k].append((time.perf_counter() - started) * 1000)
                else:
                    errors[k] += 1
                n += 1

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    elapsed = time.monotonic() - started
    done = [x for xs in latencies for x in xs]
    return {
        "sandbox_processes": processes,
        "clients": clients,
        "per_s": round(len(done) / elapsed, 1),
        "errors": sum(errors),
        "latency_ms": _stats(done) if done else None,
        "load_avg": os.getloadavg()[0],
    }


def _scaling(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each process count's rate beside linear: ``k`` times one process's rate."""
    one = runs[0]["per_s"]
    return [
        {
            "sandbox_processes": run["sandbox_processes"],
            "per_s": run["per_s"],
            "vs_linear": round(run["per_s"] / (run["sandbox_processes"] * one), 2) if one else None,
            "errors": run["errors"],
            "latency_p50_ms": (run["latency_ms"] or {}).get("p50"),
            "load_avg": run["load_avg"],
        }
        for run in runs
    ]


def _sequential(handle: StackHandle, *, n: int) -> dict[str, Any]:
    """One client, one run at a time (the e2e bench's latency): the tail without queueing."""
    samples: list[dict[str, Any]] = []
    with httpx.Client(base_url=handle.gateway_url, timeout=60) as http:
        for i in range(WARMUP + n):
            sent = time.time()
            body = _post(http, RATE_CODE, {"n": i})
            ok = body.get("status") == "succeeded" and body.get("result") == i + 1
            if i >= WARMUP:
                samples.append(
                    {"sent": sent, "received": time.time(), "ok": ok, "id": body.get("id")}
                )
    latencies = [(s["received"] - s["sent"]) * 1000 for s in samples if s["ok"]]
    stats = _stats(latencies)
    return {
        "n": n,
        "errors": sum(not s["ok"] for s in samples),
        "latency_ms": stats,
        "p99_over_p50": round(stats["p99"] / stats["p50"], 2),
        "phases_ms": phase_breakdown(*_urls(handle), samples),
        "load_avg": os.getloadavg()[0],
    }


def _urls(handle: StackHandle) -> tuple[str, str]:
    return handle.settings.database_url or "", handle.settings.redis_url or ""


def _post(http: httpx.Client, code: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        response = http.post(
            "/v1/executions", params={"wait": "true"}, json={"code": code, "args": args}
        )
        body: dict[str, Any] = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"status": "client_error", "error": str(exc)}
    return body


def _sandbox_processes(handle: StackHandle) -> int:
    return len(
        read_heartbeats(redis.Redis.from_url(handle.settings.redis_url or ""), SANDBOX_PATTERN)
    )


def _wait_processes(
    handle: StackHandle, total: int, *, timeout_s: float = 120.0, at_most: bool = False
) -> None:
    """Until ``total`` processes beat (or, ``at_most``, no more than ``total`` do)."""
    deadline = time.monotonic() + timeout_s
    while (_sandbox_processes(handle) > total) if at_most else (_sandbox_processes(handle) < total):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{total} sandbox worker processes never beat (at_most={at_most})")
        time.sleep(0.2)


def _grow_pool(handle: StackHandle, *, total: int) -> None:
    """One more pool process in the running sandbox worker (Celery's pool_grow)."""
    app = make_celery("bench-load", settings=handle.settings)
    try:
        app.control.pool_grow(1, destination=[f"sandbox@{socket.gethostname()}"], reply=True)
    finally:
        app.close()
    _wait_processes(handle, total)


class _second_host:
    """`agentcards worker sandbox` with its own home and only the stack's URLs."""

    def __init__(self, handle: StackHandle, home: Path, *, concurrency: int) -> None:
        self.handle, self.home, self.concurrency = handle, home, concurrency
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> None:
        self.home.mkdir(parents=True)
        before = _sandbox_processes(self.handle)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
        env |= {
            "AGENTCARDS_HOME": str(self.home),
            "AGENTCARDS_DATABASE_URL": self.handle.settings.database_url or "",
            "AGENTCARDS_REDIS_URL": self.handle.settings.redis_url or "",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "deploy.cli.main", "worker", "sandbox",
             "--concurrency", str(self.concurrency), "--name", "sandbox-b@%h"],
            env=env, cwd=self.home, stdout=(self.home / "worker.log").open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            _wait_processes(self.handle, before + self.concurrency)
        except RuntimeError as exc:
            tail = (self.home / "worker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"second host: {exc}; its log ends:\n{tail}") from None

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # a warm shutdown: running tasks finish
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        with contextlib.suppress(ProcessLookupError):  # whatever of the group is left
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def _rate_search(handle: StackHandle, *, probe_seconds: float, seconds: float) -> dict[str, Any]:
    """Double the rate until one does not hold, try the midpoint, then run the best one long."""
    probes: list[dict[str, Any]] = []
    best, rate = 0.0, FIRST_RATE
    while rate <= MAX_RATE:
        result = asyncio.run(_open_loop(handle, rate=rate, seconds=probe_seconds))
        probes.append(_summary(result))
        if result["holds"]:
            best, rate = rate, rate * 2
        elif not best and rate > MIN_RATE:  # a busy machine: look below the first rate
            rate /= 2
        else:
            break
    if best and best < rate <= MAX_RATE:
        middle = (best + rate) / 2
        result = asyncio.run(_open_loop(handle, rate=middle, seconds=probe_seconds))
        probes.append(_summary(result))
        best = middle if result["holds"] else best
    # A short probe can hold a rate a long run does not (the backlog grows slowly): step
    # down until the long run holds too, at most FINAL_TRIES times.
    rate, runs = best or MIN_RATE, []
    for _ in range(FINAL_TRIES):
        final = asyncio.run(_open_loop(handle, rate=rate, seconds=seconds))
        runs.append(_summary(final))
        if final["holds"] or rate <= MIN_RATE:
            break
        rate = max(MIN_RATE, round(rate * 0.7, 2))
    return {
        "probes": probes,
        "best_probe_rate_per_s": best,
        "held_rate_per_s": rate if final["holds"] else None,
        "runs": runs,
        "phases_ms": phase_breakdown(*_urls(handle), final["samples"]),
    }


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "samples"}


def _error_kind(body: dict[str, Any]) -> str:
    """An error envelope's type, else the execution's status (or the client's failure)."""
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return str(kind or body.get("status") or "no status")


async def _open_loop(handle: StackHandle, *, rate: float, seconds: float) -> dict[str, Any]:
    """Submit at ``rate`` per second whatever the answers; each waits for its result."""
    total = int(rate * seconds)
    samples: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=handle.gateway_url, timeout=60, limits=limits) as http:

        async def one(n: int) -> None:
            sent = time.time()
            try:
                response = await http.post(
                    "/v1/executions",
                    params={"wait": "true"},
                    json={"code": RATE_CODE, "args": {"n": n}},
                )
                body = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                body = {"status": "client_error", "error": str(exc)}
            ok = body.get("status") == "succeeded" and body.get("result") == n + 1
            samples.append(
                {"sent": sent, "received": time.time(), "ok": ok, "id": body.get("id"),
                 "kind": None if ok else _error_kind(body)}
            )  # fmt: skip

        start = time.monotonic()
        tasks = []
        with _ConnectionSampler(handle) as connections:
            for n in range(total):
                await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
                tasks.append(asyncio.create_task(one(n)))
            submitted_at = time.time()
            await asyncio.gather(*tasks)
    drained = max(s["received"] for s in samples) - submitted_at if samples else 0.0
    latencies = [(s["received"] - s["sent"]) * 1000 for s in samples if s["ok"]]
    errors = sum(not s["ok"] for s in samples)
    stats = _stats(latencies) if latencies else None
    return {
        "rate_per_s": rate,
        "seconds": seconds,
        "submitted": total,
        "errors": errors,
        # What the failed ones answered: a 503 at capacity is backpressure, not a fault.
        "error_kinds": dict(Counter(s["kind"] for s in samples if not s["ok"])),
        "drained_s": round(drained, 2),
        "holds": errors == 0 and drained <= DRAIN_S,
        "latency_ms": stats,
        "p99_over_p50": round(stats["p99"] / stats["p50"], 2) if stats else None,
        "load_avg": os.getloadavg()[0],
        "peak_connections": connections.peak,
        "samples": samples,
    }


class _ConnectionSampler(threading.Thread):
    """Peak Postgres backends and Redis clients of the whole stack while a run lasts."""

    def __init__(self, handle: StackHandle) -> None:
        super().__init__(daemon=True)
        self.handle = handle
        self.peak = {"postgres": 0, "redis": 0}
        self.done = threading.Event()

    def __enter__(self) -> _ConnectionSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()

    def run(self) -> None:
        client = redis.Redis.from_url(self.handle.settings.redis_url or "")
        with connect(self.handle.settings.database_url or "", autocommit=True) as conn:
            while not self.done.wait(1.0):
                row = conn.execute(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend'"
                ).fetchone()
                clients = int(client.info("clients")["connected_clients"])
                self.peak["postgres"] = max(self.peak["postgres"], int(row["n"]) if row else 0)
                self.peak["redis"] = max(self.peak["redis"], clients)
