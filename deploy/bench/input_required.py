"""`agentcards bench input-required`: an elicitation round trip through the gateway at each
MCP revision, with the SDK client, alternating.

A temporary stack whose one server is deploy/bench/ask_server.py. Each sample is one
``execute_code`` whose tool elicits, from the call to the run's result: at 2026-07-28 two
``tools/call`` (the ``InputRequiredResult``, then the retry with the answer; the SDK's
``Client.call_tool`` drives it), at 2025-11-25 one call whose stream carries the relayed
request. Also: a direct call on ``/mcp/servers/asker`` at 2026-07-28 (the toolhost speaks
2025-11-25 to that server: its question is a bare request), and one on
``/mcp/servers/asker26`` (the same module spoken to at 2026-07-28: the server's own
``InputRequiredResult``, answered through the relay, and the toolhost's retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, types
from mcp.client.session import ClientRequestContext

from deploy.bench.ask_server import write_config
from deploy.bench.e2e import WARMUP, _stats, wait_synced
from deploy.launcher.harness import temporary_stack

CODE = 'return await mcp.asker.ask(question="name?")'


async def _answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(action="accept", content={"name": "bench"})


def run(n: int = 100) -> dict[str, Any]:
    """Latencies (ms, one client, ``n`` each, alternating) of one eliciting run per revision."""
    with (
        tempfile.TemporaryDirectory(prefix="agentcards-bench-") as tmp,
        temporary_stack(mcp_config=write_config(Path(tmp) / "mcp.json")) as handle,
    ):
        wait_synced(handle.settings.database_url or "", "asker:ask")
        wait_synced(handle.settings.database_url or "", "asker26:ask_stateless")
        samples = asyncio.run(_measure(handle.gateway_url, n))
    return {"n": n, "code": CODE, **{name: _stats(values) for name, values in samples.items()}}


async def _measure(url: str, n: int) -> dict[str, list[float]]:
    clients = {
        "execute_code_2026_07_28_ms": Client(f"{url}/mcp", elicitation_callback=_answer),
        "execute_code_2025_11_25_relay_ms": Client(
            f"{url}/mcp", mode="legacy", elicitation_callback=_answer
        ),
        "direct_2026_07_28_ms": Client(f"{url}/mcp/servers/asker", elicitation_callback=_answer),
        "direct_2026_07_28_downstream_2026_ms": Client(
            f"{url}/mcp/servers/asker26", elicitation_callback=_answer
        ),
    }
    calls: dict[str, Callable[[Client], Awaitable[types.CallToolResult]]] = {
        "execute_code_2026_07_28_ms": lambda c: c.call_tool("execute_code", {"code": CODE}),
        "execute_code_2025_11_25_relay_ms": lambda c: c.call_tool("execute_code", {"code": CODE}),
        "direct_2026_07_28_ms": lambda c: c.call_tool("ask", {"question": "name?"}),
        "direct_2026_07_28_downstream_2026_ms": lambda c: c.call_tool(
            "ask_stateless", {"question": "name?"}
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in clients}
    async with contextlib.AsyncExitStack() as stack:
        for client in clients.values():
            await stack.enter_async_context(client)
        for i in range(WARMUP + n):  # alternating, so load drifts hit every kind alike
            for name, client in clients.items():
                started = time.perf_counter()
                result = await calls[name](client)
                elapsed = (time.perf_counter() - started) * 1000
                if result.is_error or "bench" not in str(result.content):
                    raise RuntimeError(f"{name}: the run did not return the answer: {result}")
                if i >= WARMUP:
                    samples[name].append(elapsed)
    return samples
