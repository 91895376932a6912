"""Benchmark of policy decisions (docs/policy.md): what one decision costs at 100 and 1,000
policies, and what deciding adds to a tool call through the RPC channel, beside no policy.

1. Decisions: ``PolicyEngine.decide`` in this process, as the toolhost calls it, on a
   generated file of N policies (permits by group and path, forbids by server and amount,
   like an operator's), for a call one policy permits (``allow``), one a forbid denies
   (``forbid``) and one nothing permits (``no_permit``); p50/p99 in microseconds each.
2. Tool calls: the real ``RpcServer`` in its own process serving ``rpc.EchoBackend``, once
   with no policy file and once per policy count, each on its own Redis database; the
   calls go to each in turn (so other work on the machine hits them alike) and the report
   gives each one's p50/p99 and the overhead against no policy, from the same run.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import redis

from deploy.bench.rpc import (
    BENCH_EXECUTION,
    BENCH_SERVER,
    EchoBackend,
    _stats,
    echo_call_ms,
)
from deploy.launcher.embedded import EmbeddedRedis, free_port
from services.toolhost.app import heartbeat_key
from services.toolhost.registry import ToolRegistry
from services.toolhost.rpc_server import RpcServer
from shared.auth.grants import Grant, write_grant
from shared.policy.engine import PolicyEngine
from shared.policy.facts import Action, Caller, tool_entity
from shared.rpc.client import RpcClient

COUNTS = (100, 1000)
# Three toolhost processes import the toolhost at once: slow on a small, busy host.
STARTUP_TIMEOUT_S = 240.0
WARMUP = 100


def policy_text(count: int) -> str:
    """``count`` policies: the bench's own two, then permits and forbids that do not apply
    to its calls but that the engine must still evaluate."""
    lines = [
        '@id("bench-allow")\npermit(principal, action == AgentCards::Action::"call_tool", '
        f'resource) when {{ resource.read_only || resource.server == "{BENCH_SERVER}" }};',
        '@id("bench-forbid")\nforbid(principal, action == AgentCards::Action::"call_tool", '
        f'resource == AgentCards::Tool::"{BENCH_SERVER}:pay") when '
        "{ context.args has amount && context.args.amount > 100 };",
    ]
    for i in range(count - len(lines)):
        if i % 2:
            lines.append(
                f'@id("group-{i}")\npermit(principal in AgentCards::Group::"g{i}", action == '
                f'AgentCards::Action::"call_tool", resource == AgentCards::Tool::"srv{i}:write") '
                f'when {{ context.args has path && context.args.path like "/srv/{i}/*" }};'
            )
        else:
            lines.append(
                f'@id("limit-{i}")\nforbid(principal, action == AgentCards::Action::"call_tool", '
                f'resource) when {{ resource.server == "srv{i}" && context.args has amount && '
                f"context.args.amount > {i} }};"
            )
    return "\n".join(lines) + "\n"


def run(n: int = 2000, calls: int = 1000) -> dict[str, Any]:
    """Decision times at each count (``n`` of each kind), then ``calls`` tool calls per side."""
    with tempfile.TemporaryDirectory(prefix="agentcards-bench-policy-") as tmp:
        files = {}
        for count in COUNTS:
            files[count] = Path(tmp) / f"policy-{count}.cedar"
            files[count].write_text(policy_text(count))
        decisions = {str(count): _decisions(PolicyEngine(files[count]), n) for count in COUNTS}
        server = EmbeddedRedis.start(Path(tmp) / "redis", port=free_port(), persist=False)
        try:
            tool_calls = _tool_calls(server.url, files, calls)
        finally:
            server.stop()
    none = tool_calls["none"]["p50"]
    return {
        "benchmark": "policy",
        "decision_us": decisions,
        "tool_call_ms": tool_calls,
        "overhead_p50_ms": {
            str(count): round(tool_calls[str(count)]["p50"] - none, 4) for count in COUNTS
        },
        "n": n,
        "calls": calls,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def _decisions(engine: PolicyEngine, n: int) -> dict[str, dict[str, float]]:
    caller = Caller(tenant="bench", key_id="k1", key_name="bench")
    context = {"surface": "code", "tenant": "bench", "execution_id": BENCH_EXECUTION}
    cases: dict[str, tuple[str, dict[str, Any], bool]] = {
        "allow": (f"{BENCH_SERVER}:echo", {"path": "/tmp/x", "n": 1}, True),
        "forbid": (f"{BENCH_SERVER}:pay", {"amount": 500, "to": "x"}, False),
        "no_permit": ("other:write", {"path": "/etc/passwd"}, False),
    }
    out = {}
    for kind, (tool, args, expected) in cases.items():
        samples = []
        for i in range(WARMUP + n):
            started = time.perf_counter()
            decision = engine.decide(
                action=Action.CALL_TOOL,
                caller=caller,
                resource=tool_entity(tool, None),
                context=context,
                args=args,
            )
            elapsed = time.perf_counter() - started
            if decision is None or decision.allowed is not expected:
                raise RuntimeError(f"bench policy decided {kind} wrongly: {decision}")
            if i >= WARMUP:
                samples.append(elapsed * 1e6)
        out[kind] = _stats(samples)
    return out


def _tool_calls(url: str, files: dict[int, Path], calls: int) -> dict[str, dict[str, float]]:
    base = url.rsplit("/", 1)[0]  # each side on a Redis database of its own
    sides: dict[str, tuple[str, Path | None]] = {"none": (f"{base}/1", None)}
    for db, count in enumerate(COUNTS, start=2):
        sides[str(count)] = (f"{base}/{db}", files[count])
    ctx = mp.get_context("spawn")  # a clean interpreter, like a real toolhost process
    procs = []
    for side_url, path in sides.values():
        started = ctx.Event()
        proc = ctx.Process(target=_serve, args=(side_url, path, started), daemon=True)
        proc.start()
        procs.append((proc, started))
    try:
        for _, started in procs:
            if not started.wait(STARTUP_TIMEOUT_S):
                raise RuntimeError(f"a toolhost did not start within {STARTUP_TIMEOUT_S}s")
        samples = asyncio.run(_alternate({k: u for k, (u, _) in sides.items()}, calls))
    finally:
        for proc, _ in procs:
            proc.terminate()
            proc.join(5)
    return {side: _stats(values) for side, values in samples.items()}


async def _alternate(urls: dict[str, str], calls: int) -> dict[str, list[float]]:
    clients = {}
    for side, url in urls.items():
        grant = Grant(tenant_id="bench", key_id="k1", key_name="bench")
        write_grant(redis.Redis.from_url(url), execution_id=BENCH_EXECUTION, grant=grant,
                    timeout_s=600)  # fmt: skip
        clients[side] = RpcClient(url, max_connections=2)
    samples: dict[str, list[float]] = {side: [] for side in urls}
    try:
        for i in range(WARMUP + calls):
            for side, client in clients.items():
                elapsed_ms = await echo_call_ms(client, {"path": "/tmp/x", "i": i})
                if i >= WARMUP:
                    samples[side].append(elapsed_ms)
    finally:
        for client in clients.values():
            await client.aclose()
    return samples


def _serve(url: str, path: Path | None, started: Event) -> None:
    async def serve() -> None:
        registry = ToolRegistry()
        registry.add(EchoBackend())
        server = RpcServer(
            redis_url=url,
            registry=registry,
            reply_ttl_s=60,
            claim_as=heartbeat_key(),
            policy=PolicyEngine(path),
        )
        started.set()
        await server.serve()

    asyncio.run(serve())


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
