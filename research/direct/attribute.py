"""Where a direct call's CPU goes in the gateway and the toolhost, by stage:
``python -m research.direct.attribute OUT_DIR`` (OUT_DIR: ``research.direct.profile``'s).

Each sample of ``py-spy record --gil --format raw`` (a stack and its count) is put in the
first stage whose pattern its stack matches (the order matters: a thread or a child process
first, then the narrower stages of the call). Prints JSON: per process, each stage's share
of the samples (%), highest first. Shares, not milliseconds: multiply by ``research.direct
.cost``'s CPU-ms per call of the same process for a per-call figure.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

STAGES: dict[str, list[tuple[str, str]]] = {
    "gateway": [
        ("records drainer (thread)", r"Drainer\.run"),
        ("find + admit, in the worker thread", r"WorkerThread\.run"),
        ("other threads", r"Thread\._bootstrap"),
        ("RPC round trip", r"RpcClient\.call"),
        ("end: privacy (tokenise)", r"finish.<locals>.tokenise"),
        ("end: record + announce batch", r"_store \(shared/direct/finish"),
        ("run: other (checks, row, cache rule)", r"run \(services/gateway/ops/direct_call"),
        ("find + admit: thread hop, grant batch", r"find_and_admit"),
        ("call_direct: other (result, view)", r"call_direct \(services"),
        ("MCP SDK: dispatch around the handler", r"JSONRPCDispatcher\._handle_request"),
        ("MCP SDK: SSE response + stored event", r"EventSourceResponse|store_event"),
        ("MCP SDK: message router", r"message_router"),
        ("HTTP: middlewares, SDK transport", r"RequestResponseCycle\.run_asgi"),
        ("tenant events relay (skills)", r"skill_changes"),
        ("uvicorn: parsing, connections", r"httptools_impl|create_protocol"),
        ("other anyio tasks", r"TaskHandle\._run_coro"),
    ],
    "toolhost": [
        ("the stdio server (child process)", r"mcp_server_time"),
        ("claim + grant read", r"_claim_and_read_grant"),
        ("reply + latency sample", r"RpcServer\._send"),
        ("per-call log line", r"RpcServer\._log"),
        ("MCP SDK client: call_tool", r"ClientSession\.call_tool|call_tool \(services/toolhost"),
        ("call: other (scope, policy, span)", r"RpcServer\._execute"),
        ("request decode, dispatch", r"RpcServer\._handle"),
        ("BLPOP loop", r"RpcServer\.serve"),
        ("MCP SDK client: stdio reader", r"stdout_reader"),
        ("MCP SDK client: stdio writer", r"stdin_writer"),
        ("MCP SDK client: dispatcher", r"JSONRPCDispatcher"),
        ("heartbeat, other tasks", r"TaskHandle\._run_coro|heartbeat"),
    ],
}


def attribute(raw: Path, stages: list[tuple[str, str]]) -> dict[str, float]:
    counts: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        total += int(n)
        stage = next((name for name, pattern in stages if re.search(pattern, stack)), "other")
        counts[stage] += int(n)
    return {"samples": total, **{k: round(100 * v / total, 1) for k, v in counts.most_common()}}


def main(out: Path) -> dict[str, dict[str, float]]:
    return {
        name: attribute(out / f"{name}.txt", stages)
        for name, stages in STAGES.items()
        if (out / f"{name}.txt").exists()
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=2))
