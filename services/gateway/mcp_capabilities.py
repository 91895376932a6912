"""MCP tools `search_capabilities` and `execute_capability` on the gateway's MCP server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import ValidationError

from services.gateway.capabilities import (
    CapabilityExecuteRequest,
    CapabilitySearchRequest,
    execute_capability,
    search_capabilities,
)
from services.gateway.config import GatewayState
from services.gateway.deps import mcp_principal
from services.gateway.errors import mcp_error
from shared.errors import AgentCardsError
from shared.executions.models import view_from_row

SEARCH_DESCRIPTION = """\
Find reusable capabilities: code that already ran successfully for a similar intent.
Give `intent` in one sentence. Matches are scored semantic similarity * reliability
against an adaptive threshold (returned as threshold_used). Each match has its id, code,
parameters_schema, success_rate and usage_count; run one with execute_capability
instead of writing new code. A match marked `degraded` uses tools that are unavailable
now (`missing_tools`) and is listed after the runnable ones.
`include_suggestions` adds related tools/capabilities."""

EXECUTE_DESCRIPTION = """\
Run a learned capability by id (or name) with `args` matching its parameters_schema.
Arguments are checked first: missing, unknown or mistyped ones are reported without
running anything. Waits for the result and returns the execution (status, result,
error, stdout, tool_calls, tool_failures)."""


def register(server: MCPServer, get_state: Callable[[], GatewayState]) -> None:
    """Add the capability tools to ``server``; ``get_state`` yields the opened clients."""

    @server.tool(name="search_capabilities", description=SEARCH_DESCRIPTION)
    async def search_capabilities_tool(
        intent: str, include_suggestions: bool = False
    ) -> dict[str, Any]:
        try:
            body = CapabilitySearchRequest(intent=intent, include_suggestions=include_suggestions)
            return await search_capabilities(get_state(), body=body)
        except (ValidationError, AgentCardsError) as exc:
            raise mcp_error(exc) from exc

    @server.tool(name="execute_capability", description=EXECUTE_DESCRIPTION)
    async def execute_capability_tool(
        capability_id: str,
        ctx: Context,
        args: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        try:
            body = CapabilityExecuteRequest(args=args or {}, wait=True, timeout_s=timeout_s)
            row = await execute_capability(
                get_state(), ref=capability_id, body=body, principal=mcp_principal(ctx)
            )
        except (ValidationError, AgentCardsError) as exc:
            raise mcp_error(exc) from exc
        return view_from_row(row).model_dump(mode="json")
