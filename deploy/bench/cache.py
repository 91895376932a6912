"""`agentcards bench cache`: one capability's miss, L1 hit and L2 hit latency, end to end, beside a
no-op Celery round trip.

A temporary stack whose one MCP server is deploy/bench/echo_server.py (`bench:echo`, read-only,
given a TTL in the `mcpServers` file so its results are cached). The miss is `POST /v1/capabilities/{id}/execute?wait=true` with
`no_cache` (a sandbox run); the L2 hit is the same request answered from `capability_cache`;
the L1 hit is `POST /v1/executions?wait=true` with the capability's code and arguments.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from deploy.bench.e2e import WARMUP, _celery_noop, _stats, wait_synced
from deploy.bench.echo_server import write_config
from deploy.launcher.harness import StackHandle, temporary_stack
from shared.db import connect

CODE = "return await mcp.bench.echo(n=args['n'])"
INTENT = "echo a number back through the bench tool"
ARGS = {"n": 7}
LEARN_TIMEOUT_S = 60.0
# An echo answers the same every time: the operator's TTL says so (none: nothing is cached).
CACHED = {"cache": {"ttl_s": 3600}}


def run(n: int = 200) -> dict[str, Any]:
    """Latencies (ms, one client) of a miss, an L1 hit and an L2 hit of one capability."""
    with (
        tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp,
        temporary_stack(
            mcp_config=write_config(Path(tmp) / "mcp.json", agentcards=CACHED)
        ) as handle,
    ):
        wait_synced(handle.settings.database_url or "")
        with httpx.Client(base_url=handle.gateway_url, timeout=60) as client:
            capability = _learn(client, handle)
            execute = f"/v1/capabilities/{capability}/execute"
            # no_cache runs also refresh the entry, so the hits below find it.
            miss = _timed(client, execute, {"args": ARGS, "no_cache": True}, None, max(20, n // 4))
            l2 = _timed(client, execute, {"args": ARGS}, "capability", n)
            l1 = _timed(client, "/v1/executions", {"code": CODE, "args": ARGS}, "execution", n)
        baseline = _celery_noop(handle, n=n)
    return {
        "n": n,
        "capability_code": CODE,
        "miss_ms": miss,
        "l1_hit_ms": l1,
        "l2_hit_ms": l2,
        "baseline_celery_noop_ms": baseline,
        "l2_hit_vs_miss_p50": round(l2["p50"] / miss["p50"], 3),
        "target": {"l2_hit_p50_ms": 3.0, "l2_hit_vs_miss_p50": 0.2},
        "meets_target": l2["p50"] <= 3.0 and l2["p50"] <= 0.2 * miss["p50"],
    }


def _learn(client: httpx.Client, handle: StackHandle) -> str:
    """Run the code once with an intent; the learning worker (loading its model the first
    time, seconds) turns it into the capability."""
    _post(client, "/v1/executions", {"code": CODE, "args": ARGS, "intent": INTENT}, None)
    deadline = time.monotonic() + LEARN_TIMEOUT_S
    with connect(handle.settings.database_url or "", autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT id FROM capabilities WHERE intent = %s", (INTENT,)
            ).fetchone()
            if row is not None:
                return str(row["id"])
            time.sleep(0.2)
    raise RuntimeError(f"the bench capability was not learned within {LEARN_TIMEOUT_S}s")


def _post(client: httpx.Client, path: str, payload: dict[str, Any], hit: str | None) -> Any:
    body = client.post(path, params={"wait": "true"}, json=payload).json()
    if body.get("status") != "succeeded" or body.get("cache_hit") != hit:
        raise RuntimeError(f"expected cache_hit={hit!r} and success from {path}: {body}")
    return body


def _timed(
    client: httpx.Client, path: str, payload: dict[str, Any], hit: str | None, n: int
) -> dict[str, float]:
    for _ in range(WARMUP):
        _post(client, path, payload, hit)
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        _post(client, path, payload, hit)
        samples.append((time.perf_counter() - started) * 1000)
    return _stats(samples)
