"""`agentcards bench e2e`: POST /v1/executions?wait=true end to end, beside a no-op Celery round trip.

Each configuration runs a whole temporary stack (embedded Postgres and Redis, toolhost
serving `bench:echo` over stdio (deploy/bench/echo_server.py), sandbox workers, learning
worker, gateway).
Latency is measured one request at a time, alternating three kinds so that other work on
the machine hits each alike: a run with one tool call, a run without one (a unique
argument, so nothing is cached) and a no-op Celery task on the same broker, in an order
shuffled every round: a run leaves work behind it (its learning ingestion, the next sandbox
child, its task events), and in a fixed order one kind always paid for the one before it
(``after_ms``: each run kind's p50 by the kind just before it). A no-op after a run
waits behind the learning message that run sent (one worker takes both queues), so
the floor the ratios use is timed apart, with nothing queued: half before the runs, half
after (`celery_noop_ms`); the one in the loop is kept as `celery_noop_after_run_ms`.
Each figure is reported beside that same-run floor, the machine's load average and where
the time went (deploy/bench/load_phases.py); `floor` times each part an execution cannot do
without (deploy/bench/floor.py) and sums them, a lower bound for the ratios. Throughput is
measured with as many concurrent clients as there are sandbox worker processes.

``--compare REF`` runs this checkout and a git ref (or a checkout's directory) side by
side, one stack each, alternating every request between them: old/new medians and their
ratio, each side beside its own Celery floor.
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
from celery import Celery

from deploy.bench.echo_server import write_config
from deploy.bench.floor import parts as floor_parts
from deploy.bench.held import checkout, held_stack
from deploy.bench.load_phases import phase_breakdown
from deploy.bench.order import rounds as kinds_in_rounds
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.broker import make_celery
from shared.config import Settings
from shared.db import connect
from shared.executions.status import ExecutionStatus
from shared.queues import Queue, TaskName

TOOL = "bench:echo"
CODE = "return await mcp.bench.echo(n=args['n'])"
NO_TOOL_CODE = "return args['n']"
WARMUP = 10
KINDS = ("tool", "no_tool", "noop")
ORDER_SEED = 52  # the kinds' order in each round: shuffled, the same in every run
ROOT = Path(__file__).resolve().parents[2]
TARGETS = {
    "p50_vs_celery_noop": 2.0,
    "p99_over_p50_one_worker": 2.0,
    "p99_over_p50_two_workers": 3.0,
    "no_tool_p50_vs_celery_noop": 1.5,
}


def run(n: int = 200, compare: str | None = None) -> dict[str, Any]:
    """Latency (1 client) and throughput (k clients) with k = 1 and 2 sandbox worker
    processes; with ``compare``, this checkout against that ref, alternately, in one run."""
    if compare:
        return run_compare(compare, n=n)
    results: dict[str, Any] = {
        "n": n,
        "code": CODE,
        "no_tool_code": NO_TOOL_CODE,
        "cpus": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "configurations": [],
    }
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        # Never cached: the same submissions repeat, and each must be a run.
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        for workers in (1, 2):
            with temporary_stack(mcp_config=config, sandbox_workers=workers) as handle:
                side = Side.of(handle)
                try:
                    configuration: dict[str, Any] = {"sandbox_workers": workers}
                    configuration |= _latency([side], n=n)[0]
                    if workers == 1:
                        configuration["floor"] = side.floor(n=n)
                    configuration["throughput_per_s"] = _throughput(side, n=n, workers=workers)
                finally:
                    side.close()
                results["configurations"].append(configuration)
    one = results["configurations"][0]
    # The first configuration's figures at the top level, as before.
    results["baseline_celery_noop"] = one["celery_noop_ms"]
    results["ratio_p50_vs_celery_noop"] = one["ratio_p50_vs_celery_noop"]
    results["target"] = TARGETS
    results["meets_target"] = _meets(results["configurations"])
    results["load_avg_end"] = os.getloadavg()
    return results


@dataclass
class Side:
    """One running stack as the bench sees it: its gateway and its broker (as URLs, so a
    stack of another checkout, in another process, is measured the same way)."""

    gateway_url: str
    database_url: str
    redis_url: str
    name: str = "this checkout"
    http: httpx.Client = field(init=False)
    celery: Celery = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=self.gateway_url, timeout=60)
        settings = Settings(database_url=self.database_url, redis_url=self.redis_url)
        self.celery = make_celery("bench", settings=settings)

    @classmethod
    def of(cls, handle: StackHandle, name: str = "this checkout") -> Side:
        settings = handle.settings
        return cls(handle.gateway_url, settings.database_url or "", settings.redis_url or "", name)

    def close(self) -> None:
        self.http.close()
        close_celery(self.celery)

    def warm_up(self) -> None:
        wait_synced(self.database_url)
        for i in range(WARMUP):
            _submit(self.http, CODE, i)
            _submit(self.http, NO_TOOL_CODE, -i - 1)
            self.noop()

    def noop(self) -> float:
        """One no-op Celery task's round trip (ms), on the learning worker: same broker."""
        started = time.perf_counter()
        self.celery.send_task(TaskName.PING, queue=Queue.MAINTENANCE).get(timeout=10)
        return (time.perf_counter() - started) * 1000

    def settle(self) -> None:
        """Until the learning worker has nothing queued (and the last message taken is done)."""
        with redis.Redis.from_url(self.redis_url) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                client.llen(queue.value) for queue in (Queue.LEARNING, Queue.MAINTENANCE)
            ):
                time.sleep(0.05)
        time.sleep(0.5)  # the last message taken may still be running

    def quiet_noops(self, n: int) -> list[float]:
        """``n`` no-op round trips once the learning worker has nothing queued: the floor."""
        self.settle()
        return [self.noop() for _ in range(n)]

    def floor(self, *, n: int) -> dict[str, Any]:
        """Each part of an execution's path, timed on this stack with nothing queued."""
        self.settle()
        out = floor_parts(
            gateway_url=self.gateway_url,
            database_url=self.database_url,
            redis_url=self.redis_url,
            noop=self.noop,
            n=n,
        )
        # A ratio target below its bound cannot be met by any code on this path and machine.
        out["targets_within_reach"] = {
            "p50_vs_celery_noop": out["one_tool_lower_bound_vs_celery_noop"]
            <= TARGETS["p50_vs_celery_noop"],
            "no_tool_p50_vs_celery_noop": out["no_tool_lower_bound_vs_celery_noop"]
            <= TARGETS["no_tool_p50_vs_celery_noop"],
        }
        return out


def _latency(sides: list[Side], *, n: int) -> list[dict[str, Any]]:
    """For each side: ``n`` runs with a tool call, ``n`` without, ``n`` Celery no-ops, one
    request at a time, every kind and side in turn (the sides' order flipped every round).

    The kinds come in a new order each round (``deploy/bench/order.py``: the same for every
    side and checkout): a run leaves work behind it (its learning ingestion, the next sandbox
    child, its task events), and in a fixed order one kind always paid for the kind before it.
    ``after_ms`` gives each run kind's p50 by the kind sampled just before it on its side.
    """
    for side in sides:
        side.warm_up()
    quiet = [side.quiet_noops(n // 2) for side in sides]
    samples: list[dict[str, list[Any]]] = [{"tool": [], "no_tool": [], "noop": []} for _ in sides]
    after: list[dict[str, dict[str, list[float]]]] = [{} for _ in sides]
    previous: list[str | None] = [None for _ in sides]
    rounds = kinds_in_rounds(KINDS, n, seed=ORDER_SEED)
    loads = []
    for i, kinds in enumerate(rounds):
        order = list(enumerate(sides))
        for k, side in order if i % 2 == 0 else reversed(order):
            for kind in kinds:
                if kind == "noop":
                    samples[k]["noop"].append(side.noop())
                else:
                    # A no-tool run gets a unique argument (negative, never a tool run's):
                    # nothing is cached.
                    code, arg = (CODE, i) if kind == "tool" else (NO_TOOL_CODE, -(WARMUP + i + 1))
                    sample = _sample(side.http, code, arg)
                    samples[k][kind].append(sample)
                    if previous[k] is not None:
                        by = after[k].setdefault(kind, {})
                        by.setdefault(str(previous[k]), []).append(_ms(sample))
                previous[k] = kind
        if i % 20 == 0:
            loads.append(os.getloadavg()[0])
    for side, before in zip(sides, quiet, strict=True):
        before.extend(side.quiet_noops(n - n // 2))
    out = []
    for side, got, noops, kinds_after in zip(sides, samples, quiet, after, strict=True):
        floor = _stats(noops)
        after_run = _stats(got["noop"])
        tool = _stats([_ms(s) for s in got["tool"]])
        no_tool = _stats([_ms(s) for s in got["no_tool"]])
        out.append(
            {
                "latency_ms": tool,
                "p99_over_p50": round(tool["p99"] / tool["p50"], 2),
                "no_tool_latency_ms": no_tool,
                "celery_noop_ms": floor,
                "ratio_p50_vs_celery_noop": round(tool["p50"] / floor["p50"], 2),
                "no_tool_ratio_p50_vs_celery_noop": round(no_tool["p50"] / floor["p50"], 2),
                # As every figure before this floor was measured: in the loop, behind the
                # run's learning message.
                "celery_noop_after_run_ms": after_run,
                "ratio_p50_vs_celery_noop_after_run": round(tool["p50"] / after_run["p50"], 2),
                "no_tool_ratio_p50_vs_celery_noop_after_run": round(
                    no_tool["p50"] / after_run["p50"], 2
                ),
                "load_avg_1m": {
                    "min": min(loads),
                    "median": statistics.median(loads),
                    "max": max(loads),
                },
                "phases_ms": phase_breakdown(side.database_url, side.redis_url, got["tool"]),
                "no_tool_phases_ms": phase_breakdown(
                    side.database_url, side.redis_url, got["no_tool"], tool_call=False
                ),
                "after_ms": {
                    kind: {
                        before: {"n": len(ms), "p50": round(statistics.median(ms), 2)}
                        for before, ms in sorted(by.items())
                    }
                    for kind, by in sorted(kinds_after.items())
                },
            }
        )
    return out


def _throughput(side: Side, *, n: int, workers: int) -> float:
    started = time.perf_counter()
    clients = [httpx.Client(base_url=side.gateway_url, timeout=60) for _ in range(workers * 2)]
    try:
        with ThreadPoolExecutor(max_workers=len(clients)) as pool:
            list(pool.map(lambda i: _submit(clients[i % len(clients)], CODE, i), range(n)))
    finally:
        for c in clients:
            c.close()
    return round(n / (time.perf_counter() - started), 1)


def _meets(configurations: list[dict[str, Any]]) -> dict[str, bool]:
    one = configurations[0]
    out = {
        "p50_vs_celery_noop": one["ratio_p50_vs_celery_noop"] <= TARGETS["p50_vs_celery_noop"],
        "p99_over_p50_one_worker": one["p99_over_p50"] <= TARGETS["p99_over_p50_one_worker"],
        "no_tool_p50_vs_celery_noop": one["no_tool_ratio_p50_vs_celery_noop"]
        <= TARGETS["no_tool_p50_vs_celery_noop"],
    }
    if len(configurations) > 1:
        two = configurations[1]["p99_over_p50"]
        out["p99_over_p50_two_workers"] = two <= TARGETS["p99_over_p50_two_workers"]
    return out


def wait_synced(database_url: str, tool: str = TOOL, *, timeout_s: float = 120.0) -> None:
    """Wait until ``tool``'s row exists: a server counts as ready as soon as it serves calls,
    while its tools' sync may still wait seconds for the embedding model, and a submission
    may only name tools that Postgres knows."""
    deadline = time.monotonic() + timeout_s
    with connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            query = "SELECT 1 FROM tools WHERE id = %s AND available"
            if conn.execute(query, (tool,)).fetchone():
                return
            time.sleep(0.2)
    raise RuntimeError(f"{tool} was not synced within {timeout_s:g}s")


def measure_latency(handle: StackHandle, *, n: int) -> dict[str, float]:
    """Latency stats of ``n`` sequential one-tool executions (after the warm-up)."""
    wait_synced(handle.settings.database_url or "")
    with httpx.Client(base_url=handle.gateway_url, timeout=60) as client:
        for i in range(WARMUP):
            _submit(client, CODE, i)
        samples = []
        for i in range(n):
            started = time.perf_counter()
            _submit(client, CODE, i)
            samples.append((time.perf_counter() - started) * 1000)
        return _stats(samples)


def _submit(client: httpx.Client, code: str, n: int) -> dict[str, Any]:
    response = client.post(
        "/v1/executions", params={"wait": "true"}, json={"code": code, "args": {"n": n}}
    )
    body: dict[str, Any] = response.json()
    expected = {"n": n} if code == CODE else n
    if body.get("status") != ExecutionStatus.SUCCEEDED or body.get("result") != expected:
        raise RuntimeError(f"bench execution failed: {body}")
    return body


def _sample(client: httpx.Client, code: str, n: int) -> dict[str, Any]:
    """One timed run, as the phase breakdown reads it (wall-clock stamps, the id)."""
    sent, started = time.time(), time.perf_counter()
    body = _submit(client, code, n)
    elapsed = time.perf_counter() - started
    return {"sent": sent, "received": sent + elapsed, "ok": True, "id": body.get("id")}


def _ms(sample: dict[str, Any]) -> float:
    return float(sample["received"] - sample["sent"]) * 1000


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
        close_celery(app)
    return _stats(samples)


def close_celery(app: Celery) -> None:
    """Close a bench's Celery app while its stack still runs. The no-ops' results, left in
    reference cycles, would otherwise unsubscribe at exit from a stopped Redis: Celery's result
    consumer then retried for ~20 s (and printed its traceback) after the JSON was out."""
    gc.collect()
    app.backend.result_consumer.stop()
    app.close()


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


# --- --compare REF -------------------------------------------------------------------


# Run in the other checkout's interpreter path: starts its stack, prints its URLs, holds
# it until stdin closes. Only names every checkout with `bench e2e` has.
def run_compare(ref: str, *, n: int) -> dict[str, Any]:
    """This checkout ("new") and ``ref`` ("old": a git ref, or a checkout's directory), one
    sandbox worker each, both stacks up at once and every request alternating between them."""
    load_start = os.getloadavg()
    with (
        checkout(ref) as old_root,
        _held_stack(old_root, "old") as old,
        _held_stack(ROOT, "new") as new,
    ):
        try:
            measured = _latency([old, new], n=n)
            measured[1]["floor"] = new.floor(n=n)
        finally:
            old.close()
            new.close()
    out: dict[str, Any] = {
        "n": n,
        "compare": {"old": ref, "new": str(ROOT)},
        "cpus": os.cpu_count(),
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "old": measured[0],
        "new": measured[1],
    }
    ratios: dict[str, Any] = {}
    for key in ("latency_ms", "no_tool_latency_ms", "celery_noop_ms", "celery_noop_after_run_ms"):
        a, b = measured[0][key], measured[1][key]
        ratios[key] = {
            "old_p50": a["p50"],
            "new_p50": b["p50"],
            "new_over_old_p50": round(b["p50"] / a["p50"], 2),
            "old_p99": a["p99"],
            "new_p99": b["p99"],
            "new_over_old_p99": round(b["p99"] / a["p99"], 2),
        }
    out["new_vs_old"] = ratios
    out["target"] = TARGETS
    out["meets_target"] = {"old": _meets([measured[0]]), "new": _meets([measured[1]])}
    return out


@contextmanager
def _held_stack(root: Path, name: str) -> Iterator[Side]:
    """A stack of the checkout at ``root``, in a process of its own (that checkout's code)."""
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        with held_stack(root, config, name=name) as held:
            yield Side(held.gateway_url, held.database_url, held.redis_url, name)
