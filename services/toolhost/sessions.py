"""One long-lived MCP client session per downstream server, reconnected with backoff when it dies.

The session lives inside ``ServerConnection.run()`` (the SDK's anyio task groups must be
entered and left by the same task); other tasks call tools through it concurrently.
A dead server is noticed three ways: its stdout reaches EOF (stdio), a call fails with
``Connection closed``, or the periodic ping fails (HTTP servers, hung processes).
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel

from services.toolhost import legacy_tasks, rounds
from services.toolhost.registry import ServerUnavailable, ToolResult, UnknownTool
from services.toolhost.results import error_text, tool_value
from services.toolhost.servers import HttpServer, ServerConfig, StdioServer
from services.toolhost.stderr import StderrTail
from services.toolhost.upstream import (
    CallContext,
    InflightCalls,
    ResultT,
    Upstream,
    roots_result,
)
from shared.executions.events import EXTENSION_PREFIX
from shared.rpc.upstream import RelayedMethod
from shared.server_states import ServerState
from shared.tools import apps

log = logging.getLogger(__name__)

CONNECTION_CLOSED = -32000  # the SDK's code for "the transport ended under this request"
MAX_RESOURCE_PAGES = 20  # resources/list pages read per server (server-everything: 1 page)

# The SDK server's refusal when a tool asks its client mid-call at 2026-07-28, and our advice.
BACK_CHANNEL = "no back-channel for server-initiated requests"
PROTOCOL_HINT = 'set "protocol": "2025-11-25" on it in the MCP config'
# What each relayed question of a 2026-07-28 server is answered with.
_ANSWER_TYPES: dict[str, type[types.Result]] = {
    "sampling/createMessage": types.CreateMessageResult,
    "elicitation/create": types.ElicitResult,
    "roots/list": types.ListRootsResult,
}

ToolsCallback = Callable[[str, list[types.Tool]], Awaitable[None]]
StateCallback = Callable[[str, str, str | None], Awaitable[None]]
# (server, notice): {"uri": ...} a subscribed resource changed, {"list": ...} a list did.
NoticeCallback = Callable[[str, dict[str, str]], Awaitable[None]]


class ServerConnection:
    """Keeps one server connected, knows its tools, and calls them."""

    def __init__(
        self,
        *,
        name: str,
        config: ServerConfig,
        on_tools: ToolsCallback,
        on_state: StateCallback,
        connect_timeout_s: float = 30.0,
        ping_interval_s: float = 10.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        upstream: Upstream | None = None,
        on_notice: NoticeCallback | None = None,
        http_auth: Any = None,
    ) -> None:
        self.name = name
        # An HTTP server's credential per request (an ``httpx2.Auth``): peruser.py's tokens.
        self._http_auth = http_auth
        self._on_notice = on_notice
        self.config = config
        self._on_tools = on_tools
        self._on_state = on_state
        self._connect_timeout_s = connect_timeout_s
        self._ping_interval_s = ping_interval_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._session: ClientSession | None = None
        self._dead = asyncio.Event()
        self._state: str = ServerState.CONNECTING.value
        self.last_error: str | None = None
        self.tools: dict[str, types.Tool] = {}
        # What the server said at its last ``initialize`` (protocol revision, serverInfo,
        # instructions, capabilities), as JSON; None before it first answered.
        self.server_info: dict[str, Any] | None = None
        self.first_attempt_done = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._upstream = upstream
        self._inflight = InflightCalls()
        # The live connection's task group, and the URIs a 2026-07-28 server was asked to
        # tell changes of (subscriptions/listen).
        self._group: anyio.abc.TaskGroup | None = None
        self._listening: set[str] = set()
        # A 2026-07-28 server whose tools answer from an older engine (rounds.py) is also
        # held at 2025-11-25: the tools listed there are called there, and resources are
        # subscribed there (the older engine's notifications); the rest stays at 2026-07-28.
        self._legacy: ClientSession | None = None
        self._legacy_tools: frozenset[str] = frozenset()

    @property
    def state(self) -> str:
        """connecting (first attempt) | ready | retrying (an attempt failed; ``last_error``
        says why; it stays so while backing off and reconnecting), as in shared/server_states.py."""
        return self._state

    async def run(self) -> None:
        """Connect, serve until the connection dies, back off, repeat; cancel to stop."""
        failures = 0
        await self._set_state(ServerState.CONNECTING, None)
        while True:
            connected_at = time.monotonic()
            stderr = StderrTail(self.name) if isinstance(self.config, StdioServer) else None
            try:
                await self._serve_once(stderr)
                error = "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = _describe(exc)
            finally:
                if stderr:
                    stderr.close()
            if stderr and (tail := await asyncio.to_thread(stderr.tail)):
                error = f"{error}; stderr: {tail}"
            self._session = None
            await self._set_state(ServerState.RETRYING, error)
            self.first_attempt_done.set()
            # A connection that stayed up a while resets the backoff: a crash after an
            # hour should be retried at once, a crash loop should slow down to 30 s.
            failures = 1 if time.monotonic() - connected_at > 60 else failures + 1
            delay = min(self._backoff_max_s, self._backoff_initial_s * 2 ** (failures - 1))
            delay *= random.uniform(0.8, 1.2)  # jitter: replicas must not reconnect in lockstep
            log.warning("server %s down (%s); reconnecting in %.1fs", self.name, error, delay)
            await asyncio.sleep(delay)

    async def call_tool(
        self, tool: str, args: dict[str, Any], *, context: CallContext | None = None
    ) -> ToolResult:
        """Call one tool; the caller bounds the time (cancelling sends the server a cancel).

        With a ``context``, the server's progress notifications become execution events
        and its sampling/elicitation requests are relayed to the execution's client.
        """
        session = self._live_session()
        if self._legacy is not None and tool in self._legacy_tools:
            session = self._legacy
        spec = self.tools.get(tool)
        if spec is None:
            raise UnknownTool(f"MCP server {self.name!r} has no tool {tool!r}")
        on_progress: ProgressFnT | None = None
        if context is not None and self._upstream is not None:
            upstream, call = self._upstream, context

            async def relay_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                await upstream.progress(call, progress, total, message)

            on_progress = relay_progress

        try:
            with self._inflight.track(context):
                if rounds.is_modern(session):
                    result = await self._call_modern(session, tool, args, context, on_progress)
                elif legacy_tasks.required(spec):  # refused unless called as a task
                    result = await legacy_tasks.call_as_task(
                        session,
                        tool,
                        args,
                        progress=on_progress,
                        on_task=self._on_task(context),
                        claim=lambda task_id: self._inflight.task(task_id, context),
                    )
                else:
                    result = await session.call_tool(tool, args, progress_callback=on_progress)
            if context is not None and self._upstream is not None:
                await self._upstream.published(context)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self._dead.set()
                raise ServerUnavailable(
                    f"MCP server {self.name!r} closed the connection during the call"
                ) from exc
            if exc.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
                await self._capabilities_missing(exc.error.data, context)
            # A JSON-RPC error (invalid params, internal error) is the tool failing.
            hint = ""
            if BACK_CHANNEL in exc.error.message:
                hint = f" ({self.name!r} asks mid-call the 2025-11-25 way: {PROTOCOL_HINT})"
            return ToolResult(ok=False, error=f"{exc.error.message} (code {exc.error.code}){hint}")
        if not isinstance(result, types.CallToolResult):
            return ToolResult(ok=False, error=f"unsupported result type {type(result).__name__}")
        if result.is_error:
            return ToolResult(ok=False, error=error_text(result))
        return ToolResult(ok=True, value=tool_value(result, output_schema=spec.output_schema))

    async def _capabilities_missing(self, data: Any, context: CallContext | None) -> None:
        """A 2026-07-28 server refused the call itself (``-32021``): recorded as if the
        toolhost had refused its question, so the caller sees the same error."""
        if context is None or self._upstream is None or not isinstance(data, dict):
            return
        required = data.get("requiredCapabilities")
        for capability, value in (required if isinstance(required, dict) else {}).items():
            if capability == "extensions" and isinstance(value, dict):  # each by its id
                for extension in value:
                    name = f"{EXTENSION_PREFIX}{extension}"
                    await self._upstream.capability_missing(context.execution_id, name, self.name)
                continue
            await self._upstream.capability_missing(context.execution_id, capability, self.name)

    async def _call_modern(
        self,
        session: ClientSession,
        tool: str,
        args: dict[str, Any],
        context: CallContext | None,
        on_progress: ProgressFnT | None,
    ) -> types.CallToolResult:
        """A call to a 2026-07-28 server: declaring the capabilities of the execution's client,
        its questions answered through the relay (rounds.py)."""
        upstream = self._upstream
        declared = None
        if context is not None and upstream is not None:
            declared = await upstream.declared(context)

        async def answer(
            key: str, request: types.InputRequest, batch: tuple[str, int]
        ) -> types.InputResponse | types.ErrorData:
            if isinstance(request, types.ListRootsRequest) and (
                self.config.roots or "roots" not in (declared or [])
            ):  # configured roots win; a client that has none gets those (none by default)
                return roots_result(self.config.roots)
            if upstream is None or context is None:
                return types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message=f"{request.method} refused: no execution's client can answer",
                )
            params = (
                request.params.model_dump(by_alias=True, mode="json", exclude_none=True)
                if request.params is not None
                else {}
            )
            answered: types.InputResponse | types.ErrorData = await upstream.relay(  # type: ignore[assignment]  # result_type is the method's answer type
                server=self.name,
                inflight=self._inflight,
                method=request.method,
                params=params,
                result_type=_ANSWER_TYPES[request.method],
                call=context,
                key=key,
                batch=batch,
                task=rounds.in_task.get(),
            )
            return answered

        with rounds.declaring(declared):
            return await rounds.call_tool(
                session,
                tool,
                args,
                answer=answer,
                progress=on_progress,
                on_task=self._on_task(context),
            )

    def _on_task(self, context: CallContext | None) -> Callable[[], Awaitable[None]]:
        """What to do once the server answered the call with a task of its own: tell the
        execution (a ``downstream_task`` event)."""
        upstream = self._upstream

        async def on_task() -> None:
            if upstream is not None and context is not None:
                await upstream.downstream_task(context, self.name)

        return on_task

    async def read_resource(
        self, params: types.ReadResourceRequestParams | str
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """``resources/read`` (the URI, or the params with a retry's answers); MCPError when
        the server refuses (unknown URI, no resources). A 2026-07-28 server's
        ``InputRequiredResult`` is returned as it is, as for ``get_prompt``."""
        session = self._live_session()
        if isinstance(params, str):
            params = types.ReadResourceRequestParams(uri=params)
        with self._inflight.track_request("resources/read"):
            if not rounds.is_modern(session):
                return await session.read_resource(str(params.uri))
            return await session.read_resource(
                str(params.uri),
                input_responses=params.input_responses,
                request_state=params.request_state,
                allow_input_required=True,
            )

    async def list_resources(
        self, *, templates: bool = False
    ) -> list[types.Resource] | list[types.ResourceTemplate]:
        """Every resource (or resource template) the server lists; none without the resources capability."""
        session = self._live_session()
        if not _has_resources(session):
            return []

        async def page(params: types.PaginatedRequestParams | None) -> Any:
            if templates:
                listed = await session.list_resource_templates(params=params)
                return listed.resource_templates, listed.next_cursor
            result = await session.list_resources(params=params)
            return result.resources, result.next_cursor

        found: list[Any] = await _paginate(page)
        return found

    async def subscribe_resource(self, uri: str) -> None:
        """``resources/subscribe``: the server's ``notifications/resources/updated`` for ``uri``
        are then published (``on_notice``). Never unsubscribed downstream: the
        gateway forwards updates only to its clients still subscribed. A 2026-07-28 server
        is asked through ``subscriptions/listen`` instead (one stream per URI), unless it is
        also held at 2025-11-25 and subscribes there."""
        session = self._live_session()
        if self._legacy is not None and _subscribes(self._legacy):
            session = self._legacy
        if not rounds.is_modern(session):
            await session.subscribe_resource(uri)
        elif uri not in self._listening and self._group is not None:
            self._listening.add(uri)
            try:
                await self._group.start(rounds.listen, session, self._notice, (uri,))
            except BaseException:
                self._listening.discard(uri)
                raise

    async def _notice(self, notice: dict[str, str]) -> None:
        """A 2026-07-28 server's change, as its notification would be handled."""
        if notice.get("list") == "tools":
            self._spawn_resync()
        elif self._on_notice is not None:
            await self._on_notice(self.name, notice)

    async def list_prompts(self) -> list[types.Prompt]:
        """Every prompt the server lists; none without the prompts capability."""
        session = self._live_session()
        capabilities = session.server_capabilities
        if capabilities is None or capabilities.prompts is None:
            return []

        async def page(params: types.PaginatedRequestParams | None) -> Any:
            listed = await session.list_prompts(params=params)
            return listed.prompts, listed.next_cursor

        found: list[types.Prompt] = await _paginate(page)
        return found

    async def get_prompt(
        self, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``prompts/get``; MCPError when the server refuses (unknown prompt, bad arguments).
        A 2026-07-28 server's ``InputRequiredResult`` is returned as it is (its keys and
        ``requestState``: the client's retry carries them back here); a 2025-11-25 server's
        question meanwhile is refused (no execution's client may get it)."""
        session = self._live_session()
        with self._inflight.track_request("prompts/get"):
            if not rounds.is_modern(session):
                return await session.get_prompt(params.name, params.arguments)
            return await session.get_prompt(
                params.name,
                params.arguments,
                input_responses=params.input_responses,
                request_state=params.request_state,
                allow_input_required=True,
            )

    async def complete(
        self,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
    ) -> types.CompleteResult:
        """``completion/complete``; an empty completion when the server has no completions."""
        session = self._live_session()
        capabilities = session.server_capabilities
        if capabilities is None or capabilities.completions is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        with self._inflight.track_request("completion/complete"):
            return await session.complete(ref, argument, context)

    def _live_session(self) -> ClientSession:
        session = self._session
        if session is None or self._state != ServerState.READY:
            detail = f": {self.last_error}" if self.last_error else ""
            raise ServerUnavailable(f"MCP server {self.name!r} is {self._state}{detail}")
        return session

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message of the server: to the execution whose call is in flight, if one is
        (as for sampling, several executions at once cannot be told apart: dropped)."""
        owner = self._inflight.owner()
        if self._upstream is None or not isinstance(owner, CallContext):
            return
        await self._upstream.log(owner, params.level, params.logger, params.data)

    async def _list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return roots_result(self.config.roots)

    async def _sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return await self._ask_upstream("sampling/createMessage", params, types.CreateMessageResult)

    async def _elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._ask_upstream("elicitation/create", params, types.ElicitResult)

    async def _ask_upstream(
        self, method: RelayedMethod, params: BaseModel, result_type: type[ResultT]
    ) -> ResultT | types.ErrorData:
        if self._upstream is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method} not supported")
        related = (getattr(params, "meta", None) or {}).get(legacy_tasks.RELATED_TASK) or {}
        return await self._upstream.relay(
            server=self.name,
            inflight=self._inflight,
            method=method,
            params=params,
            result_type=result_type,
            call=self._inflight.of_task(related.get("taskId")),  # else told from the calls
        )

    async def _serve_once(self, stderr: StderrTail | None) -> None:
        """One connection's lifetime: connect, list tools, wait until it dies."""
        self._dead = asyncio.Event()
        self._legacy, self._legacy_tools = None, frozenset()
        async with AsyncExitStack() as stack:
            session, group = await self._open(stack, stderr)
            fallback: dict[str, Any] | None = None
            with anyio.move_on_after(self._connect_timeout_s) as waited:
                await rounds.negotiate(session, self.config.protocol)
                if (
                    isinstance(self.config, HttpServer)
                    and rounds.is_modern(session)
                    and not await rounds.holds_tool_calls(session)
                ):
                    self._legacy = await group.start(self._serve_legacy)
                    fallback = _fallback(self._legacy)
                tools = await self._list_tools(session)
            if waited.cancelled_caught:
                raise ConnectTimeout(
                    f"no answer to initialize and tools/list within {self._connect_timeout_s:g}s "
                    "(AGENTCARDS_MCP_CONNECT_TIMEOUT_S); the server hangs or starts slowly"
                )
            self.tools = {t.name: t for t in tools}
            self.server_info = rounds.server_info(session)
            if fallback is not None:
                self.server_info["fallback"] = fallback
            self._session = session
            # Serve calls at once; the sync below may wait seconds for the embedding model.
            self._state = ServerState.READY.value
            await self._on_tools(self.name, tools)
            await self._set_state(ServerState.READY, None)
            self.first_attempt_done.set()
            log.info("server %s ready with %d tools", self.name, len(tools))
            group.start_soon(self._ping_loop, session)
            self._group, self._listening = group, set()
            if rounds.is_modern(session) and _lists_change(session):
                group.start_soon(rounds.listen, session, self._notice)
            await self._dead.wait()

    async def _open(
        self, stack: AsyncExitStack, stderr: StderrTail | None
    ) -> tuple[ClientSession, anyio.abc.TaskGroup]:
        """A client session on a new connection to the server and the connection's task
        group, both closed with ``stack``."""
        read, write = await stack.enter_async_context(
            _transport(self.config, stderr, self._http_auth)
        )
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)  # runs first on exit: stop relay + pinger
        # Relay the server's messages so that end-of-stream (the server exited) is seen.
        relay_send, relay_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        group.start_soon(self._relay, read, relay_send)
        # Roots are always declared (the configured list, empty by default); sampling
        # and elicitation are declared so servers offer the tools that use them, and
        # are relayed to the execution's client or refused (upstream.py); MCP Apps, so
        # servers that show their UIs only to Apps clients show them (the gateway passes
        # them on to clients that declared Apps themselves: docs/mcp-apps.md).
        session = await stack.enter_async_context(
            ClientSession(
                relay_read,
                write,
                # MCP Tasks: a server's task is read, and declared only by a call whose
                # execution can wait on it (rounds.declaring, rounds.follow_task).
                extensions={**apps.CLIENT_EXTENSIONS, rounds.TASKS_EXTENSION: {}},
                message_handler=self._on_message,
                list_roots_callback=self._list_roots,
                logging_callback=self._on_log,
                sampling_callback=self._sampling,
                elicitation_callback=self._elicitation,
                log_level="debug",  # 2026-07-28: logs are sent only to requests asking
                result_claims=rounds.task_claims(),
            )
        )
        return session, group

    async def _serve_legacy(
        self, *, task_status: anyio.abc.TaskStatus[ClientSession | None]
    ) -> None:
        """A second connection, at 2025-11-25, to a server whose tools answer 2026-07-28 calls
        from an older engine (``rounds.holds_tool_calls``), held until the first one dies;
        started with None when the server refuses that handshake (then everything stays at
        2026-07-28, read liberally)."""
        async with AsyncExitStack() as stack:
            legacy, group = await self._open(stack, None)
            try:
                await legacy.initialize()
            except MCPError as exc:
                log.info("server %s: no 2025-11-25 session beside 2026-07-28: %s", self.name, exc)
                task_status.started(None)
                return
            log.info("server %s: its tools are called at 2025-11-25", self.name)
            task_status.started(legacy)
            group.start_soon(self._ping_loop, legacy)
            await self._dead.wait()

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        """The server's tools: those it lists at 2025-11-25 when it is also held there
        (called there), then those only its 2026-07-28 listing has."""
        if self._legacy is None:
            return await _list_all_tools(session)
        legacy = await _list_all_tools(self._legacy)
        self._legacy_tools = frozenset(t.name for t in legacy)
        modern = await _list_all_tools(session)
        return legacy + [t for t in modern if t.name not in self._legacy_tools]

    async def _relay(self, source: Any, sink: Any) -> None:
        async with sink:
            async for item in source:
                await sink.send(item)
        self._dead.set()

    async def _ping_loop(self, session: ClientSession) -> None:
        while not self._dead.is_set():
            await asyncio.sleep(self._ping_interval_s)
            try:
                with anyio.fail_after(self._ping_interval_s):
                    await rounds.ping(session)
            except (MCPError, TimeoutError) as exc:
                log.warning("server %s failed its ping: %s", self.name, _describe(exc))
                self._dead.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._spawn_resync()
        elif self._on_notice is None:
            pass
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self._on_notice(self.name, {"uri": str(message.params.uri)})
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._on_notice(self.name, {"list": "resources"})
        elif isinstance(message, types.PromptListChangedNotification):
            await self._on_notice(self.name, {"list": "prompts"})
        elif isinstance(message, Exception):
            log.warning("server %s transport error: %s", self.name, _describe(message))

    def _spawn_resync(self) -> None:
        # Not awaited: a notification handler must return before the list_tools reply can be read.
        task = asyncio.get_running_loop().create_task(self._resync())
        self._background.add(task)  # keep a reference until done (asyncio holds weak ones)
        task.add_done_callback(self._background.discard)

    async def _resync(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            tools = await self._list_tools(session)
        except Exception as exc:
            log.warning("server %s: re-listing tools failed: %s", self.name, _describe(exc))
            return
        self.tools = {t.name: t for t in tools}
        log.info("server %s changed its tool list (%d tools)", self.name, len(tools))
        await self._on_tools(self.name, tools)

    async def _set_state(self, state: ServerState, error: str | None) -> None:
        self._state = state.value
        self.last_error = error
        try:
            await self._on_state(self.name, state.value, error)
        except Exception:  # bookkeeping must never stop the reconnect loop
            log.exception("recording state %s of server %s failed", state, self.name)


class ConnectTimeout(Exception):
    """Raised when a server does not finish the MCP handshake in time."""


@asynccontextmanager
async def _transport(
    config: ServerConfig, stderr: StderrTail | None, auth: Any = None
) -> AsyncIterator[tuple[Any, Any]]:
    if isinstance(config, HttpServer):
        import httpx2

        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: SSE streams idle long
        async with (
            httpx2.AsyncClient(headers=config.headers, timeout=timeout, auth=auth) as http,
            streamable_http_client(config.url, http_client=http) as streams,
        ):
            yield streams[0], streams[1]
        return
    params = StdioServerParameters(
        command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
    )
    started = False
    try:
        async with stdio_client(params, errlog=stderr.file if stderr else sys.stderr) as streams:
            started = True
            yield streams[0], streams[1]
    except OSError as exc:
        # uvloop's spawn does not name what it could not run (asyncio's did): the state and
        # logs say "No such file or directory" of the command.
        if not started and exc.filename is None:
            exc.filename = config.command
        raise


async def _paginate(
    page: Callable[[types.PaginatedRequestParams | None], Awaitable[tuple[list[Any], str | None]]],
) -> list[Any]:
    """Every item of a paginated list, at most MAX_RESOURCE_PAGES pages."""
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_RESOURCE_PAGES):
        items, cursor = await page(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        found.extend(items)
        if not cursor:
            break
    return found


def _lists_change(session: ClientSession) -> bool:
    """True when the server says any of its lists changes (worth a listen stream)."""
    caps = session.server_capabilities
    if caps is None:
        return False
    return any(
        getattr(cap, "list_changed", None) for cap in (caps.tools, caps.prompts, caps.resources)
    )


def _fallback(legacy: ClientSession | None) -> dict[str, Any] | None:
    """What ``/v1/servers`` shows of a server's second revision (``protocol_fallback``)."""
    if legacy is None:
        return None
    return {
        "protocolVersion": legacy.protocol_version,
        "for": ["tools/call", "resources/subscribe"],
        "reason": "its tools/call results at 2026-07-28 carry no resultType: an older engine "
        "answers them, which cannot ask its client mid-call at that revision",
    }


def _subscribes(session: ClientSession) -> bool:
    """True when the server says it takes ``resources/subscribe``."""
    capabilities = session.server_capabilities
    resources = capabilities.resources if capabilities is not None else None
    return resources is not None and bool(resources.subscribe)


def _has_resources(session: ClientSession) -> bool:
    capabilities = session.server_capabilities
    return capabilities is not None and capabilities.resources is not None


async def _list_all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (code {exc.error.code})"
    if isinstance(exc, ConnectTimeout):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
