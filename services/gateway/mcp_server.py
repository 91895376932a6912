"""AgentCards as an MCP server: the same operations as REST, as tools (HTTP at /mcp, or stdio)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.routing import Route

from services.gateway import mcp_capabilities
from services.gateway.config import GatewayState
from services.gateway.errors import mcp_error
from services.gateway.executions import submit_execution, wait_for_finish
from services.gateway.search import ToolSearchRequest
from services.gateway.search import search_tools as run_search
from shared.errors import AgentCardsError, NotFound
from shared.executions.models import ExecutionRequest, view_from_row
from shared.executions.store import get_execution

EXECUTE_CODE_DESCRIPTION = """\
Run Python code in an isolated sandbox that can call MCP tools, and return its result.

How to write the code:
- It runs as the body of an async function: use `await` at top level.
- Call tools as `await mcp.<server>.<tool>(**kwargs)`, e.g.
  `notes = await mcp.notes.list_notes()`. Tool ids are `server:tool` (find them with
  `search_tools`). Keyword arguments only, matching the tool's input schema.
- Run independent calls concurrently: `a, b = await asyncio.gather(mcp.x.f(), mcp.y.g())`.
- Parameters: pass `args` (a JSON object) and read them as `args["path"]`,
  `args.get("limit", 10)` or `args.path`. Use args for anything that varies between
  runs, so the code can be reused as a capability.
- The result is the value of a top-level `return` (else the last expression); it must
  be JSON-serializable. `print` output is captured and returned as `stdout`.
- `progress("message", done=3, total=10)` reports progress.
- No network, no files outside /tmp, no subprocesses: everything external goes through
  `mcp.*` tools.
Give `intent` (one sentence: what the code does); successful runs whose tools all
succeed are saved as reusable capabilities.
The response has status, result, error {type, message, traceback}, stdout, tool_calls,
tool_failures, duration_ms."""


def build_mcp_server(get_state: Callable[[], GatewayState]) -> MCPServer:
    """The MCP server with AgentCards' tools; `get_state` yields the opened clients."""
    server: MCPServer = MCPServer(
        name="agentcards",
        instructions="Search tools with search_tools, then run Python that calls them with "
        "execute_code. Read execute_code's description for how to write the code.",
    )

    @server.tool(name="execute_code", description=EXECUTE_CODE_DESCRIPTION)
    async def execute_code(
        code: str,
        ctx: Context,
        intent: str | None = None,
        args: dict[str, Any] | None = None,
        tools: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        state = get_state()
        try:
            request = ExecutionRequest(
                code=code, intent=intent, args=args or {}, tools=tools, timeout_s=timeout_s
            )
            row = await submit_execution(state, request=request)
        except (ValidationError, AgentCardsError) as exc:
            raise mcp_error(exc) from exc

        async def on_event(event: dict[str, Any]) -> None:
            if event.get("type") == "progress":
                await ctx.report_progress(
                    float(event.get("done") or 0),
                    float(event["total"]) if event.get("total") is not None else None,
                    str(event.get("message") or ""),
                )

        row = await wait_for_finish(
            state, execution_id=str(row["id"]), timeout_s=row["timeout_s"], on_event=on_event
        )
        return view_from_row(row).model_dump(mode="json")

    @server.tool(
        name="search_tools",
        description="Find MCP tools for a task described in words. Returns tool ids "
        "(`server:tool`) to call as `mcp.<server>.<tool>(...)`, descriptions and input "
        "schemas, best first. Pass context_tools (tools you already use) for graph-aware hits.",
    )
    async def search_tools(
        query: str, limit: int = 10, context_tools: list[str] | None = None
    ) -> dict[str, Any]:
        try:  # a blank query is refused by the model, as over REST, naming the field
            body = ToolSearchRequest(
                query=query, limit=max(1, min(limit, 50)), context_tools=context_tools or []
            )
        except ValidationError as exc:
            raise mcp_error(exc) from exc
        hits = await run_search(
            get_state(), query=body.query, limit=body.limit, context_tools=body.context_tools
        )
        return {
            "tools": [
                {
                    "id": h["id"],
                    "description": h["description"],
                    "input_schema": h["input_schema"],
                    "available": h["available"],
                    "score": round(float(h["score"]), 4),
                    "why": h["why"],
                }
                for h in hits
            ]
        }

    @server.tool(
        name="get_execution",
        description="Fetch an execution by id (status, result, error, stdout, tool calls).",
    )
    async def get_execution_tool(execution_id: str) -> dict[str, Any]:
        state = get_state()

        def load() -> dict[str, Any] | None:
            with state.pool.connection() as conn:
                return get_execution(conn, execution_id=execution_id)

        row = await to_thread.run_sync(load)
        if row is None:
            raise mcp_error(NotFound(f"no execution with id {execution_id!r}"))
        return view_from_row(row).model_dump(mode="json")

    mcp_capabilities.register(server, get_state)
    return server


def mount_mcp(app: FastAPI, server: MCPServer, *, host: str) -> None:
    """Serve streamable HTTP at exactly /mcp.

    A route, not a mount at "/": a catch-all mount would answer every unknown path and
    wrong method with the SDK app's plain-text 404 instead of our 404/405 envelope.
    """
    loopback = host in {"127.0.0.1", "localhost", "::1"}
    security = (
        None if loopback else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", host=host, transport_security=security
    )
    app.router.routes.append(Route("/mcp", endpoint=mcp_app, include_in_schema=False))


async def serve_stdio(settings: Any) -> None:
    """`agentcards mcp`: the same server over stdio, for desktop MCP clients."""
    state = GatewayState.open(settings)
    try:
        await build_mcp_server(lambda: state).run_stdio_async()
    finally:
        await state.close()
