"""What one execution costs a stack, in figures the machine's load barely moves.

    python -m research.runs.cost [ROOT] [--n 60]

A stack of the checkout at ROOT (default: this one) with `bench e2e`'s echo server, results
never cached; after a warm-up, ``n`` one-tool runs then ``n`` no-tool runs, one at a time
(``?wait=true``). Per run: CPU ms of each process role (psutil, children included: a
learning worker's consolidation passes count), Redis commands by name (INFO commandstats;
commands a script runs count too) and Postgres transactions and rows written
(pg_stat_database). The idle stack's rates per second come first: background work (beats,
probes) that lands in each figure over the runs' own duration; and again after the runs: what
a run leaves running (a timer, a thread) shows as idle cost grown over the first.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from deploy.bench.e2e import CODE, NO_TOOL_CODE, wait_synced
from deploy.bench.echo_server import write_config
from deploy.bench.held import held_stack
from deploy.launcher.state import StackState
from shared.db import connect

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 10
SETTLE_S = 2.0  # after the runs: their learning messages are taken


def processes(run_dir: Path) -> dict[tuple[str, int], psutil.Process]:
    """Every process of the stack by (role, pid); the toolhost's children are `mcp-server`."""
    state = StackState.load(run_dir)
    if state is None:
        raise RuntimeError(f"no stack state in {run_dir}")
    out: dict[tuple[str, int], psutil.Process] = {}
    for role, pid in state.processes.items():
        root = psutil.Process(pid)
        out[(role, pid)] = root
        for child in root.children(recursive=True):
            out[("mcp-server" if role == "toolhost" else role, child.pid)] = child
    if state.embedded_redis_pid:
        out[("redis", state.embedded_redis_pid)] = psutil.Process(state.embedded_redis_pid)
    return out


def cpu_s(procs: dict[tuple[str, int], psutil.Process]) -> dict[str, float]:
    total: dict[str, float] = collections.defaultdict(float)
    for (role, _), proc in procs.items():
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue  # ended meanwhile
        total[role] += t.user + t.system + t.children_user + t.children_system
    return total


def commands(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, dict[str, int]] = client.info("commandstats")  # type: ignore[assignment]
    return {name.removeprefix("cmdstat_"): row["calls"] for name, row in stats.items()}


def postgres(database_url: str) -> dict[str, int]:
    query = (
        "SELECT sum(xact_commit + xact_rollback)::bigint AS xacts,"
        " sum(tup_inserted + tup_updated + tup_deleted)::bigint AS rows FROM pg_stat_database"
    )
    with connect(database_url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    return {"xacts": int(row["xacts"]), "rows": int(row["rows"])} if row else {}


def _submit(http: httpx.Client, code: str, n: int) -> None:
    body = http.post(
        "/v1/executions", params={"wait": "true"}, json={"code": code, "args": {"n": n}}
    )
    if body.json().get("status") != "succeeded":
        raise RuntimeError(f"run failed: {body.text[:500]}")


def per_run(
    http: httpx.Client, procs: dict[tuple[str, int], psutil.Process], client: redis.Redis,
    database_url: str, *, code: str, n: int,
) -> dict[str, Any]:  # fmt: skip
    for i in range(WARMUP):
        _submit(http, code, 1_000_000 + i)
    time.sleep(SETTLE_S)
    cpu0, cmd0, pg0 = cpu_s(procs), commands(client), postgres(database_url)
    for i in range(n):
        _submit(http, code, i)
    time.sleep(SETTLE_S)
    cpu1, cmd1, pg1 = cpu_s(procs), commands(client), postgres(database_url)
    redis_per_run = {
        k: round((v - cmd0.get(k, 0)) / n, 2) for k, v in cmd1.items() if v != cmd0.get(k, 0)
    }
    return {
        "cpu_ms_per_run": {k: round((cpu1[k] - cpu0[k]) / n * 1000, 2) for k in sorted(cpu1)},
        "cpu_ms_total": round(sum(cpu1[k] - cpu0[k] for k in cpu1) / n * 1000, 1),
        "redis_commands_per_run": round(sum(redis_per_run.values()), 1),
        "redis": dict(sorted(redis_per_run.items(), key=lambda kv: -kv[1])),
        "postgres_xacts_per_run": round((pg1["xacts"] - pg0["xacts"]) / n, 2),
        "postgres_rows_written_per_run": round((pg1["rows"] - pg0["rows"]) / n, 2),
    }  # fmt: skip


def wakeups(procs: dict[tuple[str, int], psutil.Process]) -> dict[str, int]:
    """Context switches by role: a timer firing shows here long before it shows as CPU ms."""
    total: dict[str, int] = collections.defaultdict(int)
    for (role, _), proc in procs.items():
        try:
            switches = proc.num_ctx_switches()
        except psutil.Error:
            continue  # ended meanwhile
        total[role] += switches.voluntary + switches.involuntary
    return total


def idle(
    procs: dict[tuple[str, int], psutil.Process], client: redis.Redis, seconds: float = 10.0
) -> dict[str, Any]:
    """The stack's CPU ms, wakeups and Redis commands per second while nobody sends it anything."""
    cpu0, cmd0, woke0, started = cpu_s(procs), commands(client), wakeups(procs), time.monotonic()
    time.sleep(seconds)
    cpu1, cmd1, woke1 = cpu_s(procs), commands(client), wakeups(procs)
    idle_s = time.monotonic() - started
    return {
        "cpu_ms": {k: round((cpu1[k] - cpu0[k]) / idle_s * 1000, 1) for k in sorted(cpu1)},
        "wakeups": {k: round((woke1[k] - woke0[k]) / idle_s, 1) for k in sorted(woke1)},
        "redis_commands": round((sum(cmd1.values()) - sum(cmd0.values())) / idle_s, 1),
    }


def run(root: Path, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentcards-runcost-") as tmp:
        config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
        with held_stack(root, config, name=str(root), timeout_s=240) as stack:
            wait_synced(stack.database_url)
            client = redis.Redis.from_url(stack.redis_url)
            procs = processes(stack.run_dir)
            out: dict[str, Any] = {"root": str(root), "n": n, "load_avg_start": psutil.getloadavg()}
            out["idle_per_s"] = idle(procs, client)
            with httpx.Client(base_url=stack.gateway_url, timeout=60) as http:
                for kind, code in (("one_tool", CODE), ("no_tool", NO_TOOL_CODE)):
                    out[kind] = per_run(http, procs, client, stack.database_url, code=code, n=n)
            # Work a run leaves behind (timers, threads) shows as idle cost that grew.
            out["idle_after_runs_per_s"] = idle(procs, client)
            out["load_avg_end"] = psutil.getloadavg()
            return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("root", nargs="?", default=str(ROOT), help="a checkout's directory")
    parser.add_argument("--n", type=int, default=60, help="runs of each kind")
    args = parser.parse_args()
    print(json.dumps(run(Path(args.root), args.n), indent=1))


if __name__ == "__main__":
    main()
