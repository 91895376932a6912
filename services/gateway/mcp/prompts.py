"""MCP prompts and completions: `run_capability` (a learned capability as a ready prompt), and
completion of its `capability` argument with the caller's capability names.

MCP completes prompt and resource-template arguments only (a tool argument has no
`ref`), so the capability name an agent passes to `execute_capability` is completed
through this prompt's argument of the same meaning.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CompleteRequestParams, CompleteResult, Completion, PromptReference
from pydantic import Field

from services.gateway.mcp.errors import tool_errors
from services.gateway.ops.capabilities import capability_names, load_capability
from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.principal import Principal

PROMPT = "run_capability"
ARGUMENT = "capability"
MAX_VALUES = 100  # the spec's cap on one completion's values

RUN_DESCRIPTION = """\
Run a learned capability: the prompt gives its description, its parameters schema and the
execute_capability call to make. The `capability` argument completes to your capability names."""


def register(
    server: MCPServer,
    get_state: Callable[[], GatewayState],
    principal_for: Callable[[object], Awaitable[Principal]],
) -> None:
    """Add the `run_capability` prompt and `completion/complete` for its argument;
    ``principal_for`` resolves a request's caller (its tenant scopes both)."""

    @server.prompt(name=PROMPT, title="Run a learned capability", description=RUN_DESCRIPTION)
    async def run_capability(
        capability: Annotated[str, Field(description="capability name or id")],
        ctx: Context,
    ) -> str:
        tenant_id = (await principal_for(ctx.request_context.request)).tenant_id
        with tool_errors():
            state = get_state()
            cap = await in_pool(
                state,
                lambda conn: load_capability(state, ref=capability, tenant_id=tenant_id, conn=conn),
            )
        return run_text(cap)

    async def complete(
        ctx: ServerRequestContext[Any], params: CompleteRequestParams
    ) -> CompleteResult:
        ref, argument = params.ref, params.argument
        # Any other prompt or template has nothing to complete: an empty list, not an error.
        if not (
            isinstance(ref, PromptReference) and ref.name == PROMPT and argument.name == ARGUMENT
        ):
            return CompleteResult(completion=Completion(values=[]))
        tenant_id = (await principal_for(ctx.request)).tenant_id
        values, total = await capability_names(
            get_state(), tenant_id=tenant_id, prefix=argument.value, limit=MAX_VALUES
        )
        return CompleteResult(
            completion=Completion(values=values, total=total, has_more=total > len(values))
        )

    # MCPServer's `completion()` decorator does not pass the request, and the caller's
    # tenant comes from it; the low-level server's handler gets the context.
    server._lowlevel_server.add_request_handler(
        "completion/complete", CompleteRequestParams, complete
    )


def run_text(cap: dict[str, Any]) -> str:
    """The prompt's message: what the capability does and how to run it."""
    schema = json.dumps(cap["parameters_schema"] or {}, indent=2)
    return (
        f"Use the AgentCards capability `{cap['name']}`: {cap['description'] or cap['intent']}\n\n"
        f"Call the tool `execute_capability` with capability_id={cap['name']!r} and `args` "
        f"matching this JSON Schema:\n{schema}\n\n"
        f"It succeeded in {cap['success_rate']:.0%} of {cap['usage_count']} runs."
    )
