"""The span of one tool call made by agent code: a child of the run's sandbox span.

Named and attributed by the OpenTelemetry MCP and GenAI conventions (``tools/call <tool>``,
CLIENT, ``mcp.method.name``, ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``,
``error.type``). Sizes only: the arguments' JSON size, never their values nor the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import orjson
from opentelemetry.trace import Span, SpanKind

from shared import telemetry, tool_ids


def tool_call_span(tool: str, call_id: str, args: dict[str, Any]) -> AbstractContextManager[Span]:
    """A CLIENT span around one tool call; ``ended`` records its outcome."""
    if not telemetry.enabled():
        return telemetry.span(tool)  # the shared no-op
    return _tool_call_span(tool, call_id, args)


@contextmanager
def _tool_call_span(tool: str, call_id: str, args: dict[str, Any]) -> Iterator[Span]:
    parsed = tool_ids.parse(tool)
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": parsed.name,
        "gen_ai.tool.call.id": call_id,
        "agentcards.mcp.server": parsed.server,
        "agentcards.tool.args.size": len(orjson.dumps(args)),
    }
    with telemetry.span(
        f"tools/call {parsed.name}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def ended(span: Span, err: dict[str, Any] | None) -> None:
    """The call's outcome on its span: ``ok``, or its error type (never its message)."""
    if err is None:
        span.set_attribute("agentcards.tool.outcome", "ok")
        return
    kind = str(err.get("type") or "tool_error")
    span.set_attribute("agentcards.tool.outcome", kind)
    telemetry.fail(span, kind)
