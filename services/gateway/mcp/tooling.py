"""What every AgentCards MCP tool shares: input descriptions from the REST models, the caller, results."""

from __future__ import annotations

from typing import Any

import orjson
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from services.gateway.mcp.fit import fit
from shared.executions.models import ExecutionView
from shared.executions.status import TERMINAL, ExecutionStatus

# Hints for clients deciding whether to ask before a call (they are hints, not guarantees).
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Agent code calls whatever downstream tools it is given: those may delete, write or reach
# the outside world, so running code is neither read-only nor idempotent nor closed.
RUNS_CODE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)


def described(model: type[BaseModel], field: str) -> Any:
    """A ``Field`` carrying the REST model's description of ``field``: one text for both surfaces.

    Only the description: defaults and bounds stay on the model, which the tool still
    validates with, so a bad value gets the same structured error as over REST.
    """
    return Field(description=model.model_fields[field].description)


def model_result(model: BaseModel) -> CallToolResult:
    """A response model as a tool result: its JSON as structured content and, for clients that
    read text, the same JSON compact (the SDK's default text is indented: half as large again,
    sent and stored in the session's event stream twice over)."""
    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=orjson.dumps(data).decode())],
        structured_content=data,
    )


def execution_result(
    view: ExecutionView, *, max_bytes: int, failure_is_error: bool = True
) -> CallToolResult:
    """An execution as a tool result: structured, and ``isError`` when it ended without success.

    Still running (the wait ran out) is not an error: the client polls ``get_execution``.
    ``get_execution`` reads without failing (``failure_is_error=False``). Cut to fit
    ``max_bytes`` (fit.py): what was left out is named in ``truncated``.
    """
    data = fit(view.model_dump(mode="json"), max_bytes=max_bytes, execution_id=view.id)
    failed = view.status in TERMINAL and view.status != ExecutionStatus.SUCCEEDED
    return CallToolResult(
        content=[TextContent(type="text", text=orjson.dumps(data).decode())],
        structured_content=data,
        is_error=failed and failure_is_error,
    )
