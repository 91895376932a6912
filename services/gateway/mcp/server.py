"""AgentCards as an MCP server: the same operations as REST, as tools (HTTP at /mcp, or stdio)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import anyio
from anyio import to_thread
from fastapi import FastAPI
from mcp.server.apps import Apps
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field
from starlette.routing import Route

from services.gateway.auth import resolve_sync
from services.gateway.mcp import (
    capabilities,
    downstream_resources,
    input_required,
    legacy_tasks,
    log_messages,
    modes,
    passthrough,
    prompts,
    skill_changes,
    skills,
    task_notices,
    tasks,
)
from services.gateway.mcp.caching import CACHE_HINTS
from services.gateway.mcp.caller import request_principal
from services.gateway.mcp.direct import Listeners
from services.gateway.mcp.errors import GatewayMCPServer, tool_errors
from services.gateway.mcp.fit import reply_bytes
from services.gateway.mcp.missing_capability import refuse_failed_run
from services.gateway.mcp.replicas.manager import ReplicatedSessionManager, session_manager
from services.gateway.mcp.replicas.registry import Registry
from services.gateway.mcp.tooling import (
    READ_ONLY,
    RUNS_CODE,
    described,
    execution_result,
    model_result,
)
from services.gateway.ops.admission import admit_submission
from services.gateway.ops.direct_records import start_drainer
from services.gateway.ops.execution_feedback import report_execution
from services.gateway.ops.execution_reads import paged_view, read_execution
from services.gateway.ops.models.feedback import ExecutionFeedback, FeedbackResult
from services.gateway.ops.models.tools import Declarations, ToolSearchRequest, ToolSearchResponse
from services.gateway.ops.tool_search import search_tools as search_tools_op
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.config import Settings
from shared.errors import ConfigError, Unauthorized
from shared.executions.models import ExecutionRequest, ExecutionView, RetryPolicy, view_from_row
from shared.executions.pages import PART_DESCRIPTION, Part
from shared.inputs import SQL_INT_MAX
from shared.sandbox.child.helpers import HELPER_MODULES
from shared.version import VERSION

# Tool inputs, described once on the REST models (the OpenAPI schema shows the same text).
Code = Annotated[str, described(ExecutionRequest, "code")]
Intent = Annotated[str | None, described(ExecutionRequest, "intent")]
Args = Annotated[dict[str, Any] | None, described(ExecutionRequest, "args")]
Tools = Annotated[list[str] | None, described(ExecutionRequest, "tools")]
TimeoutS = Annotated[float | None, described(ExecutionRequest, "timeout_s")]
NoCache = Annotated[bool, described(ExecutionRequest, "no_cache")]
Retry = Annotated[RetryPolicy, described(ExecutionRequest, "retry")]
Learn = Annotated[bool, described(ExecutionRequest, "learn")]
Lang = Annotated[str, described(ExecutionRequest, "language")]
Query = Annotated[str, described(ToolSearchRequest, "query")]
Limit = Annotated[int, described(ToolSearchRequest, "limit")]
ContextTools = Annotated[list[str] | None, described(ToolSearchRequest, "context_tools")]
IncludeOutOfScope = Annotated[bool, described(ToolSearchRequest, "include_out_of_scope")]
DeclarationsArg = Annotated[Declarations | None, described(ToolSearchRequest, "declarations")]
ExecutionId = Annotated[str, Field(description="the `id` an execution tool returned")]
PartArg = Annotated[Part | None, Field(description=PART_DESCRIPTION)]
Offset = Annotated[
    int,
    Field(
        ge=0,
        le=SQL_INT_MAX,
        description="with `part`: the first byte (0, or a page's `next_offset`)",
    ),
]
MaxBytes = Annotated[
    int | None,
    Field(
        ge=1024,
        description="with `part`: page size in bytes (default and cap: a quarter "
        "of the reply cap, AGENTCARDS_MCP_REPLY_MAX_BYTES)",
    ),
]
FeedbackOk = Annotated[bool, described(ExecutionFeedback, "ok")]
FeedbackReason = Annotated[str | None, described(ExecutionFeedback, "reason")]
# Changes what was learned, reversibly by nothing: not read-only, and a repeat changes nothing.
REPORTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# A tool result that is an ExecutionView (the output schema) with `isError` set on failure.
ExecutionResult = Annotated[CallToolResult, ExecutionView]
# A run's tool result, or (2026-07-28) the questions its tools ask first (input_required.py).
ExecutionOrInput = ExecutionResult | InputRequiredResult

EXECUTE_CODE_DESCRIPTION = """\
Run Python (or TypeScript, see below) code in an isolated sandbox that can call MCP tools,
and return its result.

How to write the code:
- It runs as the body of an async function: use `await` at top level.
- Call tools as `await mcp.<server>.<tool>(**kwargs)`, e.g.
  `notes = await mcp.notes.list_notes()`. Tool ids are `server:tool` (find them with
  `search_tools`). Keyword arguments only, matching the tool's input schema.
- Names with `-` or `.` are written with `_`: tool `get-sum` on server `my-server` is
  `mcp.my_server.get_sum(...)`; the exact names also work: `mcp["my-server"]["get-sum"](...)`.
- Already defined, no import needed: the modules <helpers>, and ToolCallError.
  Any other standard-library module can be imported; third-party packages are not
  installed.
- A failed call raises ToolCallError (catch it as `except ToolCallError as e`); its
  `.type` says why: `unknown_tool` (no such tool; the message names the nearest ones),
  `tool_not_allowed` (outside this execution's `tools` or your API key's allow-list),
  `invalid_arguments` (missing, unknown or mistyped arguments for the tool's input
  schema; the message names them and lists the valid ones; nothing was sent),
  `rate_limited` (retry after the time it gives), `timeout`, `server_unavailable`,
  `output_limit` (the tool's result is larger than a tool result may be: ask it for
  less), `authorization_required` (the server acts for the person calling and has no
  credential of theirs: the message says what to do), `tool_error` (the tool itself failed).
- What a call returns: a tool with an output schema returns its structured content, a
  dict (e.g. `(await mcp.filesystem.read_text_file(path=p))["content"]`); any other
  tool its text (JSON text arrives parsed into a dict or list), or a list of content
  blocks (dicts with `type`: `image`, `audio`, `resource`) for other content.
  `search_tools` hits say it per tool in `returns` (and `output_schema`).
- Run independent calls concurrently: `a, b = await asyncio.gather(mcp.x.f(), mcp.y.g())`.
- Parameters: pass `args` (a JSON object) and read them as `args["path"]`,
  `args.get("limit", 10)` or `args.path`. Use args for anything that varies between
  runs, so the code can be reused as a capability.
- The result is the value of a top-level `return` (else the last expression); it must
  be JSON: dict, list, str, int, float, bool, None. Tuples become lists and int dict keys
  become strings; anything else (a set, bytes, a datetime, an object, NaN) fails with
  `result_not_json` naming where, e.g. `result['a'][2] is a set`: convert it first
  (`sorted(s)`, `d.isoformat()`). `print` output is captured and returned as `stdout`.
- Code that does not parse fails with `syntax_error`; `error.details` has its `line`
  and `column`.
- `progress("message", done=3, total=10)` reports progress.
- `await mcp.<server>.read_resource(uri)` reads one of that server's resources (the
  server needs a tool in scope), e.g. a URI a tool returned as a resource link.
- No network, no files outside /tmp, no subprocesses: everything external goes through
  `mcp.*` tools.
- Limits: a run longer than `timeout_s` (capped by the server) ends with `timeout`; a
  result too large fails with `output_limit`; CPU and memory with `cpu_limit` and
  `memory_limit`. Each error's message names the setting or field to change.
TypeScript: pass `language: "typescript"` (JavaScript is accepted as TypeScript); the same
sandbox, limits and errors. Call tools with one object: `await mcp.server.tool({ a: 1 })`
(`mcp["my-server"]["get-sum"]({...})` for exact names); `args.x`, `capabilities.name({...})`,
`progress(message, done, total)`, `console.log` (captured as stdout), `return` JSON data; a
failed call throws `ToolCallError` (`e.type` as above). No imports of npm, JSR or URLs.
search_tools with `declarations: "typescript"` gives each tool's input (and, with an output
schema, its result) as a TypeScript type.
Give `intent` (one sentence: what the code does); successful runs whose tools all
succeed are saved as reusable capabilities.
The response has status, result, error {type, message, traceback, details}, stdout,
tool_calls, tool_failures, duration_ms, and cache_hit: an identical earlier run whose tools
are all read-only is answered from the cache (pass no_cache=true to run anyway). A run that
did not succeed is an error result (isError) with the same fields. A reply larger than the
MCP reply cap (256 KiB by default) leaves the large parts out (stdout: cut) and says so in
`truncated`; read them in pages with get_execution(part=..., offset=...).""".replace(
    "<helpers>", ", ".join(f"`{name}`" for name in HELPER_MODULES)
)


# The path /mcp is served at (the endpoint its tasks belong to).
ENDPOINT = "/mcp"
# The tools of /mcp that run as tasks.
RUNS = frozenset({"execute_code", "execute_capability"})

GET_EXECUTION_DESCRIPTION = """\
Fetch an execution by id (status, result, error, stdout, tool calls). A reply never exceeds
the MCP reply cap: when a part was too large it is left out (or, for stdout, cut) and
`truncated` names it with its full size. Read such a part in pages: pass `part` (`result`,
`stdout`, `tool_calls`, `tool_failures`), `offset` (0 first, then each page's `next_offset`
until it is null) and optionally `max_bytes`; `page.text` holds the page. The result's pages
joined are its JSON text: `json.loads` gives the value."""


def build_mcp_server(
    get_state: Callable[[], GatewayState],
    *,
    stdio_key: str | None = None,
    listeners: Listeners | None = None,
) -> MCPServer:
    """The MCP server with AgentCards' tools, prompts, completions and logging.

    Over HTTP each call runs as its request's principal; over stdio as ``stdio_key``'s.
    ``listeners`` are the app's (shared with the direct surface, which tells them of server
    changes); without them, the server's own, which nothing tells.
    """
    listeners = Listeners() if listeners is None else listeners

    async def principal_for(request: object) -> Principal:
        with tool_errors():
            return await request_principal(request, state=get_state(), stdio_key=stdio_key)

    async def principal_of(ctx: Context) -> Principal:
        return await principal_for(ctx.request_context.request)

    async def principal_in(ctx: Any) -> Principal:  # a request's context (task methods)
        return await principal_for(ctx.request)

    async def task_result(view: ExecutionView, task: dict[str, Any]) -> CallToolResult:
        return execution_result(view, max_bytes=get_state().settings.mcp_reply_max_bytes)

    task_methods = tasks.TaskMethods(get_state, principal_in, endpoint=ENDPOINT, shape=task_result)

    server: MCPServer = GatewayMCPServer(
        name="agentcards",
        version=VERSION,
        cache_hints=CACHE_HINTS,
        title="AgentCards",
        instructions="Search tools with search_tools, then run Python that calls them with "
        "execute_code. Read execute_code's description for how to write the code.",
        request_state_security=input_required.state_security(get_state),
        # MCP Apps: declared, with no views of its own; the servers' views and tools'
        # _meta.ui pass through to clients that declared it (docs/mcp-apps.md).
        extensions=[tasks.TasksExtension(task_methods), Apps()],
    )

    # 2025-11-25's tasks (legacy_tasks.py): the two tools that run code take them.
    server.middleware.append(legacy_tasks.LegacyTasks(task_methods, RUNS.__contains__))
    server.middleware.append(task_notices.TaskNotices(task_methods))  # on listen streams

    @server.tool(
        name="execute_code",
        title="Run Python or TypeScript code with tools",
        description=EXECUTE_CODE_DESCRIPTION,
        annotations=RUNS_CODE,
    )
    async def execute_code(
        code: Code,
        ctx: Context,
        intent: Intent = None,
        args: Args = None,
        tools: Tools = None,
        timeout_s: TimeoutS = None,
        no_cache: NoCache = False,
        retry: Retry = "never",
        learn: Learn = True,
        language: Lang = "python",
    ) -> ExecutionOrInput:
        state = get_state()
        principal = await principal_of(ctx)
        with tool_errors():
            resumed = await passthrough.resume_as_tool(state, ctx, principal=principal)
            if resumed is not None:  # a 2026-07-28 client's answers: the same run goes on
                return await refuse_failed_run(state, ctx, resumed)
            request = ExecutionRequest(
                code=code,
                language=language,  # type: ignore[arg-type]  # the model checks (and maps aliases)
                intent=intent,
                args=args or {},
                tools=tools,
                timeout_s=timeout_s,
                no_cache=no_cache,
                retry=retry,
                learn=learn,
            )
            admission = await admit_submission(state, request=request, principal=principal)
            ran = await tasks.run_as_tool(
                state,
                ctx,
                admission=admission,
                principal=principal,
                endpoint=ENDPOINT,
                tool="execute_code",
            )
            return await refuse_failed_run(state, ctx, ran)

    @server.tool(
        name="search_tools",
        title="Search tools",
        description="Find MCP tools for a task described in words. Returns tool ids "
        "(`server:tool`) to call as `mcp.<server>.<tool>(...)`, descriptions, input schemas "
        "and what a call returns (`returns`, with an example; `output_schema` where the "
        "server declares one), best first. Pass context_tools (tools you already use) for graph-aware hits. "
        "Tools your API key may not call are left out unless include_out_of_scope (then "
        "listed last, marked runnable: false). declarations=typescript adds each tool's "
        "input as a TypeScript type, for code run with language typescript.",
        annotations=READ_ONLY,
    )
    async def search_tools(
        query: Query,
        ctx: Context,
        limit: Limit = 10,
        context_tools: ContextTools = None,
        include_out_of_scope: IncludeOutOfScope = False,
        declarations: DeclarationsArg = None,
    ) -> Annotated[CallToolResult, ToolSearchResponse]:
        principal = await principal_of(ctx)
        with tool_errors():  # a blank query is refused by the model, as over REST, naming the field
            body = ToolSearchRequest(
                query=query,
                limit=limit,
                context_tools=context_tools or [],
                include_out_of_scope=include_out_of_scope,
                declarations=declarations,
            )
            return model_result(await search_tools_op(get_state(), body=body, principal=principal))

    @server.tool(
        name="get_execution",
        title="Get an execution",
        description=GET_EXECUTION_DESCRIPTION,
        annotations=READ_ONLY,
    )
    async def get_execution_tool(
        execution_id: ExecutionId,
        ctx: Context,
        part: PartArg = None,
        offset: Offset = 0,
        max_bytes: MaxBytes = None,
    ) -> ExecutionResult:
        tenant_id = (await principal_of(ctx)).tenant_id
        cap = get_state().settings.mcp_reply_max_bytes
        with tool_errors():  # a stale run is reaped on the way, as REST's GET does
            row = await read_execution(get_state(), execution_id=execution_id, tenant_id=tenant_id)
            view = view_from_row(row)
            if part is None:  # reading worked, so not an error even when the run failed
                return execution_result(view, max_bytes=cap, failure_is_error=False)
            size = min(max_bytes or cap // 4, cap)
            while True:  # text that escapes to more than it weighs gets a smaller page
                paged = paged_view(view, part=part, offset=offset, max_bytes=size)
                reply = execution_result(paged, max_bytes=cap, failure_is_error=False)
                if reply_bytes(reply.structured_content or {}) <= cap or size <= 1024:
                    return reply
                size //= 2

    @server.tool(
        name="report_execution",
        title="Report whether a run was right",
        description="Say whether a finished execution did what it was for. ok=false (a wrong "
        "or empty answer) takes the run back as learned evidence: the capability it alone "
        "created is deleted, one it counted for counts it as a failure, its cached results "
        "go. ok=true is recorded only. (To keep a run from being learned at all, pass "
        "learn=false to execute_code.)",
        annotations=REPORTS,
    )
    async def report_execution_tool(
        execution_id: ExecutionId, ok: FeedbackOk, ctx: Context, reason: FeedbackReason = None
    ) -> FeedbackResult:
        principal = await principal_of(ctx)
        with tool_errors():
            body = ExecutionFeedback(ok=ok, reason=reason)
            return await report_execution(
                get_state(), execution_id=execution_id, body=body, principal=principal
            )

    capabilities.register(server, get_state, principal_of, endpoint=ENDPOINT)
    prompts.register(server, get_state, principal_for)
    downstream_resources.register(server, get_state, principal_for)
    # after: it extends the resource handlers
    skills.register(server, get_state, principal_for, listeners)
    log_messages.register(server)
    modes.register(server, get_state, principal_for, listeners)  # last: it wraps the tools above
    return server


def mount_mcp(
    app: FastAPI, server: MCPServer, *, registry: Registry, settings: Settings
) -> ReplicatedSessionManager:
    """Serve streamable HTTP at exactly /mcp; the session manager, for the app to run.

    A route, not a mount at "/": a catch-all mount would answer every unknown path and
    wrong method with the SDK app's plain-text 404 instead of our 404/405 envelope.
    """
    manager = session_manager(server._lowlevel_server, registry=registry, settings=settings)
    endpoint = StreamableHTTPASGIApp(manager)
    # First: matched before the REST routes (FastAPI matches an included router's routes one
    # by one, about 0.5 ms per request for all of them); no REST path is /mcp.
    app.router.routes.insert(0, Route("/mcp", endpoint=endpoint, include_in_schema=False))
    return manager


async def serve_stdio(settings: Any) -> None:
    """`agentcards mcp`: the same server over stdio, for desktop MCP clients.

    When the stack has API keys, AGENTCARDS_API_KEY must hold a valid one: refused at start
    (ConfigError) otherwise, and re-checked on every call (revocation applies within seconds).
    """
    state = GatewayState.open(settings)
    drainer = start_drainer(state)  # direct calls' records, to Postgres
    try:
        key = settings.api_key.get_secret_value() if settings.api_key else None
        if settings.auth:
            try:
                await to_thread.run_sync(lambda: resolve_sync(state.auth, token=key, state=state))
            except Unauthorized as exc:
                raise ConfigError(_stdio_refusal(has_key=key is not None)) from exc
        async with anyio.create_task_group() as group:  # the relay: skills learned meanwhile
            group.start_soon(skill_changes.relay, lambda: state)
            await build_mcp_server(lambda: state, stdio_key=key).run_stdio_async()
            group.cancel_scope.cancel()
    finally:
        drainer.stop()
        await state.close()


def _stdio_refusal(*, has_key: bool) -> str:
    if has_key:
        return (
            "AGENTCARDS_API_KEY is unknown or revoked: set it to an active key "
            "(`agentcards keys list`, `agentcards keys create --tenant <tenant>`)"
        )
    return (
        "this stack has API keys: set AGENTCARDS_API_KEY to one "
        "(`agentcards keys create --tenant <tenant>` prints a new key)"
    )
