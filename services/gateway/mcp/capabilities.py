"""MCP tools `search_capabilities` and `execute_capability` on the gateway's MCP server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field

from services.gateway.mcp import passthrough, tasks
from services.gateway.mcp.errors import tool_errors
from services.gateway.mcp.missing_capability import refuse_failed_run
from services.gateway.mcp.tooling import (
    READ_ONLY,
    RUNS_CODE,
    described,
)
from services.gateway.ops.capabilities import admit_capability, search_capabilities
from services.gateway.ops.models.capabilities import (
    CapabilityExecuteRequest,
    CapabilitySearchRequest,
    CapabilitySearchResponse,
)
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.executions.models import ExecutionView, RetryPolicy

Intent = Annotated[str, described(CapabilitySearchRequest, "intent")]
IncludeSuggestions = Annotated[bool, described(CapabilitySearchRequest, "include_suggestions")]
IncludeOutOfScope = Annotated[bool, described(CapabilitySearchRequest, "include_out_of_scope")]
LanguageFilter = Annotated[
    Literal["python", "typescript"] | None, described(CapabilitySearchRequest, "language")
]
CapabilityRef = Annotated[
    str,
    Field(description="capability id or name (the prompt run_capability completes names)"),
]
CapabilityArgs = Annotated[dict[str, Any] | None, described(CapabilityExecuteRequest, "args")]
TimeoutS = Annotated[float | None, described(CapabilityExecuteRequest, "timeout_s")]
NoCache = Annotated[bool, described(CapabilityExecuteRequest, "no_cache")]
Retry = Annotated[RetryPolicy, described(CapabilityExecuteRequest, "retry")]
Learn = Annotated[bool, described(CapabilityExecuteRequest, "learn")]

SEARCH_DESCRIPTION = """\
Find reusable capabilities: code that already ran successfully for a similar intent.
Give `intent` in one sentence. Matches are scored semantic similarity * reliability
against an adaptive threshold (returned as threshold_used). Each match has its id, code,
parameters_schema, success_rate and usage_count; run one with execute_capability
instead of writing new code. A match marked `degraded` uses tools that are unavailable
now (`missing_tools`) and is listed after the runnable ones. Capabilities calling tools
your API key may not call are left out unless `include_out_of_scope` (then marked
`runnable: false`). When nothing reaches the threshold, `candidates` lists the closest
ones with their scores (`below_threshold: true`) for you to judge.
`include_suggestions` adds related tools/capabilities. Each match says its `language`
(python or typescript; execute_capability runs either); `language` keeps only one."""

EXECUTE_DESCRIPTION = """\
Run a learned capability by id (or name) with `args` matching its parameters_schema.
Arguments are checked first: missing, unknown or mistyped ones are reported without
running anything, and so is a capability calling tools your API key may not call
(tool_not_allowed, naming them). Waits for the result and returns the execution (status, result,
error, stdout, tool_calls, tool_failures). A result cached from an identical earlier run
comes back at once with `cache_hit` set (only runs whose tools are all read-only are
cached); pass `no_cache: true` to run it anyway."""


def register(
    server: MCPServer,
    get_state: Callable[[], GatewayState],
    principal_of: Callable[[Context], Awaitable[Principal]],
    *,
    endpoint: str,
) -> None:
    """Add the capability tools to ``server``; ``get_state`` yields the opened clients and
    ``principal_of`` the caller (a tool error when it has no valid key); a run that becomes
    an MCP task belongs to ``endpoint``."""

    @server.tool(
        name="search_capabilities",
        title="Search learned capabilities",
        description=SEARCH_DESCRIPTION,
        annotations=READ_ONLY,
    )
    async def search_capabilities_tool(
        intent: Intent,
        ctx: Context,
        include_suggestions: IncludeSuggestions = False,
        include_out_of_scope: IncludeOutOfScope = False,
        language: LanguageFilter = None,
    ) -> CapabilitySearchResponse:
        principal = await principal_of(ctx)
        with tool_errors():
            body = CapabilitySearchRequest(
                intent=intent,
                include_suggestions=include_suggestions,
                include_out_of_scope=include_out_of_scope,
                language=language,
            )
            return await search_capabilities(get_state(), body=body, principal=principal)

    @server.tool(
        name="execute_capability",
        title="Run a learned capability",
        description=EXECUTE_DESCRIPTION,
        annotations=RUNS_CODE,
    )
    async def execute_capability_tool(
        capability_id: CapabilityRef,
        ctx: Context,
        args: CapabilityArgs = None,
        timeout_s: TimeoutS = None,
        no_cache: NoCache = False,
        retry: Retry = "never",
        learn: Learn = True,
    ) -> Annotated[CallToolResult, ExecutionView] | InputRequiredResult:
        principal = await principal_of(ctx)
        state = get_state()
        with tool_errors():
            resumed = await passthrough.resume_as_tool(state, ctx, principal=principal)
            if resumed is not None:  # a 2026-07-28 client's answers: the same run goes on
                return await refuse_failed_run(state, ctx, resumed)
            body = CapabilityExecuteRequest(
                args=args or {},
                wait=True,
                timeout_s=timeout_s,
                no_cache=no_cache,
                retry=retry,
                learn=learn,
            )
            admission = await admit_capability(
                state, ref=capability_id, body=body, principal=principal
            )
            ran = await tasks.run_as_tool(
                state,
                ctx,
                admission=admission,
                principal=principal,
                endpoint=endpoint,
                tool="execute_capability",
            )
            return await refuse_failed_run(state, ctx, ran)
