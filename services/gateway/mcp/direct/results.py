"""A direct call's answer as the tool's own ``CallToolResult``: its value, its failure, or a
refusal before it ran."""

from __future__ import annotations

import json
from typing import Any

from mcp import types
from pydantic import ValidationError

from services.gateway.mcp.errors import error_result, validation_body
from services.gateway.ops import direct as ops
from shared.errors import AgentCardsError, ErrorType, error_dict
from shared.executions.models import ExecutionView
from shared.executions.status import ExecutionStatus


def direct_result(view: ExecutionView, tool: ops.DirectTool) -> types.CallToolResult:
    """A direct call's execution as the tool's own result: its value as content (and as
    structured content when the tool declares an output schema); ``isError`` with the
    server's message (or our ``{type, message}``) when it failed."""
    if view.status != ExecutionStatus.SUCCEEDED:
        failure = view.tool_failures[0] if view.tool_failures else None
        if failure is not None and failure.type == ErrorType.TOOL_ERROR:  # the server's own
            result = types.CallToolResult(
                content=[types.TextContent(type="text", text=failure.error)], is_error=True
            )
        elif failure is not None:  # ours (invalid_arguments, timeout, …): our error body,
            # with its details (authorization_required: the connect link's ``url``)
            details = view.error.details if view.error is not None else None
            kind = failure.type or ErrorType.TOOL_ERROR
            result = error_result(error_dict(kind, failure.error, details=details or None))
        elif view.error is not None:
            result = error_result(error_dict(view.error.type, view.error.message))
        else:  # the wait ran out: still running
            result = error_result(
                error_dict(ErrorType.TIMEOUT, f"execution {view.id} is {view.status}")
            )
    else:
        result = types.CallToolResult(
            content=_content(view.result),
            structured_content=_structured(view.result, tool.output_schema),
        )
    # Which execution recorded it (GET /v1/executions/<id>), and whether the cache answered.
    meta = {"agentcards/execution_id": view.id}
    if view.cache_hit:
        meta["agentcards/cache_hit"] = view.cache_hit
    result.meta = meta
    return result


def refused(exc: AgentCardsError | ValidationError) -> types.CallToolResult:
    """A call refused before it ran (rate limit, sizes, bad arguments, an outage) as a tool
    error with our body, as every gateway tool's (``error_result``)."""
    if isinstance(exc, AgentCardsError):
        return error_result(exc.to_dict())
    return error_result(validation_body(exc))


def _content(value: Any) -> list[types.ContentBlock]:
    if isinstance(value, str):
        return [types.TextContent(type="text", text=value)]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "type" in v for v in value)
    ):
        try:  # the server's own blocks (images, resources), as the toolhost passed them on
            return [
                types.TextContent.model_validate(v) if v["type"] == "text" else _block(v)
                for v in value
            ]
        except ValidationError:
            pass
    return [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))]


def _block(value: dict[str, Any]) -> types.ContentBlock:
    block: types.ContentBlock = types.CallToolResult.model_validate({"content": [value]}).content[0]
    return block


def _structured(value: Any, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """Structured content when the tool declares an output schema: the value, re-wrapped as
    ``{"result": value}`` for SDK servers whose schema wraps a non-object (the toolhost unwrapped it)."""
    if schema is None:
        return None
    properties = schema.get("properties")
    wrapped = isinstance(value, dict) and set(value) == {"result"}
    if isinstance(properties, dict) and set(properties) == {"result"} and not wrapped:
        return {"result": value}
    return value if isinstance(value, dict) else None
