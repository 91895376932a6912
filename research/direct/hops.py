"""Where a direct call's time goes, per hop: ``python -m research.direct.hops [N]``.

A temporary stack with the time server (as ``bench direct`` runs it) exports every span to
a receiver in this process; ``N`` sequential ``tools/call`` through ``/mcp/servers/time``
with the MCP SDK client. Per call, from its spans: the gateway's HTTP span, the part of it
before the run (auth, MCP session, find, admission, grant), ``execution.run`` (the RPC call
and the end), the gateway's tool-call span (the RPC round trip), the toolhost's span, and
the MCP SDK's downstream ``tools/call`` span in the toolhost (the server over stdio). Spans
cost a little themselves: read the shares, not the sums. Prints JSON (medians, ms).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from deploy.bench.direct import ARGS, TOOL, _http_session, _key, _write_config, venv_python
from deploy.bench.e2e import wait_synced
from deploy.bench.otlp_receiver import ReceivedSpan, start_receiver
from deploy.launcher.harness import temporary_stack


def main(n: int = 100) -> dict[str, Any]:
    receiver = start_receiver()
    python = venv_python()
    client_ms: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="agentcards-hops-") as tmp:
            config = _write_config(Path(tmp) / "m.json", python, agentcards=True, only_time=True)
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
            with temporary_stack(mcp_config=config, extra_env=env) as handle:
                database_url = handle.settings.database_url or ""
                wait_synced(database_url, f"time:{TOOL}")
                headers = {"Authorization": f"Bearer {_key(database_url)}"}
                url = f"{handle.gateway_url}/mcp/servers/time"

                async def calls() -> None:
                    async with _http_session(url, headers) as session:
                        for i in range(n + 10):
                            started = time.perf_counter()
                            await session.call_tool(TOOL, ARGS)
                            if i >= 10:
                                client_ms.append((time.perf_counter() - started) * 1000)

                asyncio.run(calls())
                time.sleep(6)  # the last batches leave the exporters (every 5 s)
        spans = receiver.all_spans()
    finally:
        receiver.stop()
    return {"n": n, "client_p50_ms": round(statistics.median(client_ms), 2), **_hops(spans)}


def _hops(spans: list[ReceivedSpan]) -> dict[str, Any]:
    by_trace: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    parts: dict[str, list[float]] = defaultdict(list)
    for trace in by_trace.values():
        run = [s for s in trace if s.name == "execution.run"]
        http = [s for s in trace if s.service.endswith("gateway") and s.kind == "server"]
        if not run or not http:
            continue
        run_span, http_span = run[0], min(http, key=lambda s: s.start_ns)
        gw_call = [s for s in trace if s.service.endswith("gateway") and s.kind == "client"]
        th = [s for s in trace if s.service.endswith("toolhost") and s.kind == "server"]
        down = [s for s in trace if s.service.endswith("toolhost") and s.kind == "client"]
        parts["gateway_http"].append(http_span.duration_ms)
        parts["before_run"].append((run_span.start_ns - http_span.start_ns) / 1e6)
        parts["execution_run"].append(run_span.duration_ms)
        parts["after_run"].append((http_span.end_ns - run_span.end_ns) / 1e6)
        if gw_call:
            parts["rpc_round_trip"].append(gw_call[0].duration_ms)
            parts["run_outside_rpc"].append(run_span.duration_ms - gw_call[0].duration_ms)
        if th:
            parts["toolhost"].append(th[0].duration_ms)
            if gw_call:
                parts["rpc_transport"].append(gw_call[0].duration_ms - th[0].duration_ms)
        sdk = [
            s
            for s in trace
            if s.service.endswith("gateway") and s.kind == "server" and s is not http_span
        ]
        if sdk:
            parts["http_to_mcp_handler"].append((sdk[0].start_ns - http_span.start_ns) / 1e6)
            parts["mcp_handler_end_to_http_end"].append((http_span.end_ns - sdk[0].end_ns) / 1e6)
        for s in trace:
            if s.name.startswith("prof.") or s.name == "admission":
                parts[s.name].append(s.duration_ms)
        if th and down:
            parts["toolhost_before_downstream"].append((down[0].start_ns - th[0].start_ns) / 1e6)
            parts["toolhost_after_downstream"].append((th[0].end_ns - down[0].end_ns) / 1e6)
        if down:
            parts["server_stdio"].append(down[0].duration_ms)
            if th:
                parts["toolhost_own"].append(th[0].duration_ms - down[0].duration_ms)
    medians = {k: round(statistics.median(v), 2) for k, v in parts.items()}
    calls = [t for t in by_trace.values() if any(s.name == "execution.run" for s in t)]
    middle = statistics.median(parts["gateway_http"])

    def http_ms(trace: list[ReceivedSpan]) -> float:
        return max(s.duration_ms for s in trace if s.kind == "server")

    example = min(calls, key=lambda t: abs(http_ms(t) - middle))  # the median call
    counts: dict[str, int] = defaultdict(int)
    for span in spans:
        counts[f"{span.service}:{span.name}"] += 1
    return {
        "traces": len(parts["gateway_http"]),
        "spans": dict(sorted(counts.items())),
        "median_ms": medians,
        "example": timeline(example),
    }


def timeline(spans: list[ReceivedSpan]) -> list[str]:
    """One trace's spans as offsets from its first (ms): start, duration, who, name, parent."""
    first = min(s.start_ns for s in spans)
    return [
        f"{(s.start_ns - first) / 1e6:7.2f} {s.duration_ms:7.2f} {s.service[11:]:9} {s.kind:8} "
        f"{s.name} id={s.span_id[:6]} parent={s.parent_id[:6]}"
        for s in sorted(spans, key=lambda s: s.start_ns)
    ]


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100), indent=2))
