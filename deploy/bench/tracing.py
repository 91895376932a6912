"""`agentcards bench tracing`: the cost of OpenTelemetry tracing on `bench e2e`'s execution.

Three temporary stacks run side by side: two with tracing off (no endpoint: nothing
installed) and one exporting every span (the default sampler, parentbased_always_on) over
OTLP/HTTP to a real receiver in this process. Executions alternate between them, one at a
time, the order rotated each round, so all see the same machine load; p50 and p99 of each.
The two identical "off" stacks give the noise floor: an overhead below their difference is
not measured. With tracing off the added code is a flag check per span site: its cost is
measured directly (in-process, per execution's worth of span sites), since no end-to-end
figure could resolve it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from deploy.bench.e2e import CODE, WARMUP, _stats, _submit, wait_synced
from deploy.bench.echo_server import write_config
from deploy.bench.otlp_receiver import start_receiver
from deploy.launcher.harness import temporary_stack
from shared import telemetry
from shared.sandbox.spans import tool_call_span

# Span sites one execution of CODE passes: HTTP, admission, publish, consume, run, 9 stages,
# one tool call (worker and toolhost), RPC inject, ingest. Timed as the off path runs them.
SPAN_SITES = 18


def run(n: int = 200) -> dict[str, Any]:
    """p50/p99 of POST /v1/executions?wait=true with tracing off and on, alternating."""
    receiver = start_receiver()
    on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    off_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
    try:
        with tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp:
            config = write_config(Path(tmp) / "mcp.json", agentcards={"cache": {"ttl_s": 0}})
            with (
                temporary_stack(mcp_config=config, extra_env=off_env) as off,
                temporary_stack(mcp_config=config, extra_env=off_env) as off_control,
                temporary_stack(mcp_config=config, extra_env=on_env) as on,
            ):
                stacks = {"off": off, "off_control": off_control, "on": on}
                for handle in stacks.values():
                    wait_synced(handle.settings.database_url or "")
                samples: dict[str, list[float]] = {name: [] for name in stacks}
                clients = {
                    name: httpx.Client(base_url=handle.gateway_url, timeout=60)
                    for name, handle in stacks.items()
                }
                try:
                    for i in range(WARMUP):
                        for client in clients.values():
                            _submit(client, CODE, i)
                    names = list(stacks)
                    for i in range(n):
                        for name in names[i % 3 :] + names[: i % 3]:
                            started = time.perf_counter()
                            _submit(clients[name], CODE, i)
                            samples[name].append((time.perf_counter() - started) * 1000)
                finally:
                    for client in clients.values():
                        client.close()
                time.sleep(1.0)  # the last batches leave the exporters
                spans = len(receiver.all_spans())
    finally:
        receiver.stop()
    off_stats, on_stats = _stats(samples["off"]), _stats(samples["on"])
    control = _stats(samples["off_control"])

    def pct(a: float, b: float) -> float:
        return round((a / b - 1) * 100, 1)

    return {
        "n": n,
        "code": CODE,
        "tracing_off_ms": off_stats,
        "tracing_off_control_ms": control,
        "tracing_on_ms": on_stats,
        "overhead_p50_pct": pct(on_stats["p50"], off_stats["p50"]),
        "overhead_p99_pct": pct(on_stats["p99"], off_stats["p99"]),
        "noise_floor_p50_pct": pct(control["p50"], off_stats["p50"]),
        "spans_exported": spans,
        "spans_per_execution": round(spans / (n + WARMUP), 1),
        "off_path_us_per_execution": _off_path_us(),
        "target": {"overhead_p50_pct": 5},
    }


def _off_path_us(rounds: int = 20_000) -> float:
    """Microseconds one execution's span sites cost with tracing off (this process has none)."""
    assert not telemetry.enabled()
    started = time.perf_counter()
    for _ in range(rounds):
        for _ in range(SPAN_SITES - 2):
            with telemetry.span("x"):
                pass
        with tool_call_span("bench:echo", "call-1", {"n": 1}):
            pass
        telemetry.inject()
    return round((time.perf_counter() - started) / rounds * 1e6, 2)
