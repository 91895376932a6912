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

import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.abc
from mcp import ClientSession, types
from mcp.client import subscriptions
from mcp.client._probe import negotiate_auto
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from shared.tools import apps

log = logging.getLogger(__name__)

MAX_ROUNDS = 10  # the SDK client's own cap on InputRequiredResult rounds per call
# A result with a state and no question: retried after 50 ms, doubling up to 250 ms (the SDK's).
_STATE_ONLY_BACKOFF_S = 0.05
_STATE_ONLY_BACKOFF_CAP_S = 0.25

# The client capabilities to declare on this task's requests (None: the toolhost's own).
_capabilities: ContextVar[dict[str, Any] | None] = ContextVar("capabilities", default=None)

# A tool name no server has: ``holds_tool_calls`` calls it to see how the server answers.
PROBE_TOOL = "agentcards.revision-probe"

# Per 2026-07-28 session, the methods it answered without ``resultType``.
_untagged: weakref.WeakKeyDictionary[ClientSession, set[str]] = weakref.WeakKeyDictionary()

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
    toolhost, the MCP Apps extension (what it declares is no question to a client)."""
    declared: dict[str, Any] = {name: {} for name in capabilities or []}
    declared["extensions"] = apps.CLIENT_EXTENSIONS
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


async def call_tool(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    *,
    answer: Answer,
    progress: Any = None,
) -> types.CallToolResult:
    """``tools/call`` at 2026-07-28: the questions of every ``InputRequiredResult`` answered
    together (``answer``, per key, told the result's batch) and the call retried with the
    answers and the server's ``requestState``, until the server's own result. An
    ``ErrorData`` from ``answer`` ends the call with it (``MCPError``)."""
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
        )
        if isinstance(result, types.CallToolResult):
            return result
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
