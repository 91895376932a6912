"""The toolhost's span of one tool call: a SERVER child of the worker's tool-call span.

Its parent comes from the RPC request (``RpcRequest.otel``, W3C trace context); inside it
the MCP SDK's own client span sends ``tools/call`` downstream with ``traceparent`` and
``tracestate`` in ``params._meta`` (SEP-414), so a server that traces continues the trace.
Names and outcome only: never the arguments or the result.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from opentelemetry.trace import SpanKind

from shared import telemetry
from shared.rpc.protocol import RpcReply, RpcRequest


@asynccontextmanager
async def call_span(request: RpcRequest) -> AsyncIterator[Callable[[RpcReply], None]]:
    """Around handling ``request``; yields the function that records its reply."""
    if not telemetry.enabled():
        yield _ignore
        return
    # The deadline is absolute (Unix time): what was left of it when this replica popped it.
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": request.tool_name,
        "agentcards.mcp.server": request.server,
        "agentcards.rpc.call_id": request.call_id,
        "agentcards.rpc.deadline_left_ms": round((request.deadline - time.time()) * 1000, 1),
    }
    with telemetry.span(
        f"tools/call {request.tool_name}",
        kind=SpanKind.SERVER,
        attributes=attributes,
        parent=telemetry.extract(request.otel),
    ) as span:

        def record(reply: RpcReply) -> None:
            if reply.ok:
                span.set_attribute("agentcards.tool.outcome", "ok")
            else:
                kind = str(reply.error.type) if reply.error else "tool_error"
                span.set_attribute("agentcards.tool.outcome", kind)
                telemetry.fail(span, kind)

        yield record


def _ignore(reply: RpcReply) -> None:
    """Not tracing: nothing to record."""
