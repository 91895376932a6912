"""Which revision the toolhost speaks to a downstream server, and a 2026-07-28 server's questions.

Each server is asked ``server/discover`` first (the SDK's ``negotiate_auto``): a server that
answers with 2026-07-28 is spoken to statelessly, any other (the published npm servers) gets
the 2025-11-25 ``initialize`` handshake as before. A 2026-07-28 server asks its client
something by ending a ``tools/call`` with an ``InputRequiredResult``; the toolhost answers
each of its ``inputRequests`` through the relay (``upstream.py``) and retries the call with
``inputResponses`` and the server's ``requestState`` unchanged, round after round. The call
that asked is known (it is the one that got the result), so unlike a 2025-11-25 server's bare
request nothing has to be attributed, and the server's own keys travel with each question.

Per call, the server is told the capabilities of the MCP client that started the execution
(``_meta`` ``io.modelcontextprotocol/clientCapabilities``), not the toolhost's own: a server
asks only what that client can answer (a REST caller's run declares none).

Liberal in what it accepts: a 2026-07-28 result without ``resultType`` is a complete result
(the revision requires the tag; servers that answer through an older engine leave it out).
Such a server is asked once, at connect, to call a tool no server has (``holds_tool_calls``):
a ``tools/call`` answered untagged shows its tools run on an older engine, which cannot ask
its client mid-call at 2026-07-28, so ``sessions.py`` calls those tools at 2025-11-25.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import anyio
import anyio.abc
from mcp import ClientSession, types
from mcp.client import subscriptions
from mcp.client._probe import negotiate_auto
from mcp.client.extension import ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from shared.rpc.upstream import TASKS, TASKS_EXTENSION
from shared.tools import apps

log = logging.getLogger(__name__)

MAX_ROUNDS = 10  # the SDK client's own cap on InputRequiredResult rounds per call
# A result with a state and no question: retried after 50 ms, doubling up to 250 ms (the SDK's).
_STATE_ONLY_BACKOFF_S = 0.05
_STATE_ONLY_BACKOFF_CAP_S = 0.25

# The client capabilities to declare on this task's requests (None: the toolhost's own).
_capabilities: ContextVar[dict[str, Any] | None] = ContextVar("capabilities", default=None)

# MCP Tasks (SEP-2663): the capability name the gateway advertises for a run that can wait on
# a downstream server's task, and the extension it stands for.
# How often a downstream task is polled: the server's pollIntervalMs, within these bounds.
_POLL_MIN_S = 0.1
_POLL_MAX_S = 2.0
TERMINAL_TASK = frozenset({"completed", "failed", "cancelled"})
# Set while a call follows its server's task: the questions asked then are the task's.
in_task: ContextVar[bool] = ContextVar("in_task", default=False)

# A tool name no server has: ``holds_tool_calls`` calls it to see how the server answers.
PROBE_TOOL = "agentcards.revision-probe"

# Per 2026-07-28 session, the methods it answered without ``resultType``.
_untagged: weakref.WeakKeyDictionary[ClientSession, set[str]] = weakref.WeakKeyDictionary()

_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)

# (key, question, (batch id, questions in the batch)) -> the client's answer or a refusal.
Answer = Callable[
    [str, types.InputRequest, tuple[str, int]],
    Awaitable[types.InputResponse | types.ErrorData],
]


async def negotiate(session: ClientSession, protocol: str = "auto") -> None:
    """``server/discover`` at 2026-07-28, else the 2025-11-25 handshake (the SDK's policy;
    ``protocol`` ``2025-11-25``: the handshake only); on a 2026-07-28 connection each
    request may then declare its caller's capabilities."""
    if protocol == "2025-11-25":
        await session.initialize()
        return
    await negotiate_auto(session)
    if not is_modern(session):
        return
    _accept_untagged(session)
    # The SDK stamps every request's _meta with the session's capabilities; a call made
    # inside ``declaring`` carries its caller's instead (pinned SDK: mcp 2.3.0).
    stamp = session._stamp

    def declared_stamp(data: dict[str, Any], opts: Any) -> None:
        stamp(data, opts)
        capabilities = _capabilities.get()
        if capabilities is not None:
            data["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY] = capabilities

    session._stamp = declared_stamp


def _accept_untagged(session: ClientSession) -> None:
    """Read a result without ``resultType`` as complete instead of failing the SDK's
    validation of the 2026-07-28 wire shape (pinned SDK: mcp 2.3.0), noting its method."""
    dispatcher = session._dispatcher
    send = dispatcher.send_raw_request
    seen = _untagged.setdefault(session, set())

    async def liberal(method: str, params: Any, opts: Any) -> Any:
        raw = await send(method, params, opts)
        if isinstance(raw, dict) and "resultType" not in raw:
            seen.add(method)
            raw["resultType"] = "complete"
        return raw

    dispatcher.send_raw_request = liberal  # type: ignore[method-assign,assignment]


def untagged(session: ClientSession) -> frozenset[str]:
    """The methods a 2026-07-28 server answered without ``resultType`` so far."""
    return frozenset(_untagged.get(session, ()))


async def holds_tool_calls(session: ClientSession) -> bool:
    """Whether a 2026-07-28 server answers ``tools/call`` at that revision: it is asked to
    call ``PROBE_TOOL`` (no such tool, so nothing runs) and must tag its answer, an error
    result or a JSON-RPC error. False: its tools answer from an older engine."""
    try:
        await session.call_tool(PROBE_TOOL, {}, allow_input_required=True, allow_claimed=True)
    except (MCPError, RuntimeError, ValueError):
        return True  # an error (unknown tool) or an odd answer: nothing shows an older engine
    return "tools/call" not in untagged(session)


def is_modern(session: ClientSession) -> bool:
    """True when the server is spoken to at 2026-07-28 (stateless requests)."""
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def ping(session: ClientSession) -> None:
    """A liveness check: ``ping`` (2025-11-25), ``server/discover`` (2026-07-28, which has no
    ping); MCPError when the server answers with an error."""
    if is_modern(session) and session.protocol_version is not None:
        await session.send_discover(session.protocol_version)
    else:
        await session.send_ping()


@contextmanager
def declaring(capabilities: list[str] | None) -> Iterator[None]:
    """Requests sent in the block declare these client capabilities (names such as
    ``sampling``; None: none at all, nobody can answer) and, as every request of the
    toolhost, the MCP Apps extension (what it declares is no question to a client). The
    name ``tasks`` declares the Tasks extension."""
    names = set(capabilities or [])
    declared: dict[str, Any] = {name: {} for name in names - {TASKS}}
    declared["extensions"] = dict(apps.CLIENT_EXTENSIONS)
    if TASKS in names:
        declared["extensions"][TASKS_EXTENSION] = {}
    token = _capabilities.set(declared)
    try:
        yield
    finally:
        _capabilities.reset(token)


def server_info(session: ClientSession) -> dict[str, Any]:
    """What the server said when connected, as JSON, with the revision spoken to it."""
    result = session.initialize_result or session.discover_result
    info = result.model_dump(mode="json", by_alias=True, exclude_none=True) if result else {}
    info["protocolVersion"] = session.protocol_version
    if session.discover_result is not None and session.server_info is not None:
        info["serverInfo"] = session.server_info.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    return info


class DownstreamTask(types.Result):
    """A server's ``CreateTaskResult`` or ``tasks/get`` answer (the SDK has no model for them)."""

    model_config = types.Result.model_config | {"extra": "allow"}
    task_id: str
    status: str
    poll_interval_ms: int | None = None

    def field(self, name: str) -> Any:
        """A status's own field (``inputRequests``, ``result``, ``error``), kept as sent:
        typed, these would collide with the core results' fields in the SDK's claim check."""
        return (self.model_extra or {}).get(name)


class CreatedTask(DownstreamTask):
    """A server's ``CreateTaskResult`` (a ``tools/call`` answered with a task)."""

    result_type: Literal["task"] = "task"  # type: ignore[assignment]  # narrows ResultType


class _TaskParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any]


class _GetTask(types.Request[_TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the SDK mirrors it into Mcp-Name over HTTP


class _UpdateTask(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class _CancelTask(types.Request[_TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


def task_claims() -> dict[str, list[ResultClaim[Any]]]:
    """The ``resultType: "task"`` answer, read as a ``DownstreamTask`` (ClientSession's
    ``result_claims``; the extension is declared per call, inside ``declaring``)."""

    async def unresolved(result: CreatedTask, ctx: Any) -> types.CallToolResult:
        raise TypeError("a downstream task is followed by rounds.follow_task")

    return {
        TASKS_EXTENSION: [ResultClaim(result_type="task", model=CreatedTask, resolve=unresolved)]
    }


async def follow_task(
    session: ClientSession,
    created: DownstreamTask,
    *,
    answer: Answer,
    on_created: Callable[[], Awaitable[None]] | None = None,
) -> types.CallToolResult:
    """Wait on a server's task (``tasks/get`` at its poll interval) until it ends: its
    questions (``input_required``) answered through ``answer`` and sent back with
    ``tasks/update``; ``completed`` is its result, ``failed`` its JSON-RPC error (MCPError),
    ``cancelled`` an error too. A call cancelled meanwhile cancels the task."""
    if on_created is not None:
        await on_created()
    task_id = created.task_id
    read = created
    answered: set[str] = set()
    token = in_task.set(True)
    try:
        while read.status not in TERMINAL_TASK:
            asked = {
                k: v for k, v in (read.field("inputRequests") or {}).items() if k not in answered
            }
            if read.status == "input_required" and asked:
                questions = {
                    key: _INPUT_REQUEST.validate_python(value) for key, value in asked.items()
                }
                responses = await _answer_all(questions, answer)
                answered |= set(responses)
                params = _UpdateParams(
                    task_id=task_id,
                    input_responses={
                        key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
                        for key, value in responses.items()
                    },
                )
                await session.send_request(_UpdateTask(params=params), types.Result)
            else:
                interval = (read.poll_interval_ms or 500) / 1000
                await anyio.sleep(min(max(interval, _POLL_MIN_S), _POLL_MAX_S))
            read = await session.send_request(
                _GetTask(params=_TaskParams(task_id=task_id)), DownstreamTask
            )
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5), contextlib.suppress(Exception):
            await session.send_request(
                _CancelTask(params=_TaskParams(task_id=task_id)), types.Result
            )
        raise
    finally:
        in_task.reset(token)
    if read.status == "completed":
        return types.CallToolResult.model_validate(read.field("result") or {"content": []})
    if read.status == "failed":
        error = read.field("error") or {}
        raise MCPError(
            code=int(error.get("code") or types.INTERNAL_ERROR),
            message=str(error.get("message") or "the server's task failed"),
            data=error.get("data"),
        )
    raise MCPError(code=types.INTERNAL_ERROR, message="the server cancelled its task")


async def call_tool(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    *,
    answer: Answer,
    progress: Any = None,
    on_task: Callable[[], Awaitable[None]] | None = None,
) -> types.CallToolResult:
    """``tools/call`` at 2026-07-28: the questions of every ``InputRequiredResult`` answered
    together (``answer``, per key, told the result's batch) and the call retried with the
    answers and the server's ``requestState``, until the server's own result. An
    ``ErrorData`` from ``answer`` ends the call with it (``MCPError``). A server's task (when
    the call declared MCP Tasks) is waited on to its end (``follow_task``; ``on_task`` told
    when it is made)."""
    responses: types.InputResponses | None = None
    state: str | None = None
    backoff = _STATE_ONLY_BACKOFF_S
    for _ in range(MAX_ROUNDS + 1):
        result = await session.call_tool(
            tool,
            args,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
            allow_claimed=True,
        )
        if isinstance(result, types.CallToolResult):
            return result
        if isinstance(result, DownstreamTask):
            return await follow_task(session, result, answer=answer, on_created=on_task)
        if not isinstance(result, types.InputRequiredResult):
            raise TypeError(f"unsupported result type {type(result).__name__}")
        state = result.request_state
        asked = result.input_requests or {}
        if not asked:  # only a state: the server is working, ask again shortly (as the SDK)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _STATE_ONLY_BACKOFF_CAP_S)
            responses = None
            continue
        responses = await _answer_all(asked, answer)
    raise MCPError(
        code=types.INTERNAL_ERROR,
        message=f"{tool}: the server still asked after {MAX_ROUNDS} rounds of answers",
    )


async def _answer_all(asked: dict[str, types.InputRequest], answer: Answer) -> types.InputResponses:
    """Every question of one result answered at once; the first refusal ends the call."""
    batch = (uuid.uuid4().hex, len(asked))
    answers: dict[str, types.InputResponse | types.ErrorData] = {}

    async def one(key: str, request: types.InputRequest) -> None:
        answers[key] = await answer(key, request, batch)

    async with anyio.create_task_group() as group:
        for key, request in asked.items():
            group.start_soon(one, key, request)
    for given in answers.values():
        if isinstance(given, types.ErrorData):
            raise MCPError.from_error_data(given)
    return {key: given for key, given in answers.items() if not isinstance(given, types.ErrorData)}


async def listen(
    session: ClientSession,
    on_notice: Callable[[dict[str, str]], Awaitable[None]],
    uris: tuple[str, ...] = (),
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A 2026-07-28 server's changes (``subscriptions/listen``, which replaced
    ``resources/subscribe`` and unsolicited list-changed notifications), each as a notice:
    ``{"uri": ...}`` for a resource of ``uris``, ``{"list": "tools" | "prompts" |
    "resources"}`` for a list (without ``uris``). Started once the server acknowledged."""
    lists = not uris
    try:
        async with subscriptions.listen(
            session,
            tools_list_changed=lists,
            prompts_list_changed=lists,
            resources_list_changed=lists,
            resource_subscriptions=uris,
        ) as changes:
            task_status.started()
            async for event in changes:
                if isinstance(event, subscriptions.ResourceUpdated):
                    await on_notice({"uri": event.uri})
                else:
                    await on_notice({"list": _LISTS[type(event)]})
    except subscriptions.SubscriptionLost as exc:  # the connection's end is noticed elsewhere
        log.info("subscriptions/listen ended: %s", exc)


_LISTS: dict[type, str] = {
    subscriptions.ToolsListChanged: "tools",
    subscriptions.PromptsListChanged: "prompts",
    subscriptions.ResourcesListChanged: "resources",
}
