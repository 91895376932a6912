"""What a downstream server may ask of its client mid-call, and where it goes: roots, progress, sampling, elicitation.

The toolhost is the downstream servers' MCP client, but the answers to sampling and
elicitation belong to the MCP client that started the execution. One session per server
carries the calls of many executions, and a server's request does not say which call it
belongs to (stdio has no related-request id), so it is attributed through the calls in
flight on that session: one execution with calls there owns it; none or several, and the
request is refused rather than sent to the wrong client.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import redis
import redis.asyncio as aioredis
from mcp import types
from pydantic import BaseModel, FileUrl, ValidationError
from redis.exceptions import RedisError

from shared.executions.events import (
    CLIENT_CAPABILITY_MISSING,
    DOWNSTREAM_TASK,
    TOOL_LOG,
    TOOL_PROGRESS,
    publish_event,
)
from shared.rpc import upstream
from shared.rpc.upstream import CAPABILITY_OF, ClientRequest, RelayedMethod

log = logging.getLogger(__name__)
ResultT = TypeVar("ResultT", bound=types.Result)
T = TypeVar("T")

_MAX_PROGRESS_MESSAGE = 1_000
_MAX_LOG_MESSAGE = 4_096


@dataclass(frozen=True, slots=True)
class CallContext:
    """Which execution a tool call serves, and its id in that execution's trace."""

    execution_id: str
    tool: str  # server:tool
    trace_call_id: str | None = None
    deadline: float | None = None  # the call's absolute deadline: nobody waits past it
    caller: Caller | None = None  # who called, for a server that acts for them (peruser.py)
    # The capabilities its execution's client relays, when read with the call's grant (one
    # round trip: ``declared`` then needs none); None there: nobody listens.
    declared: list[str] | None = None
    declared_read: bool = False


@dataclass(frozen=True, slots=True)
class Caller:
    """The person (or key) a call runs for, from its grant; ``subject_token`` sealed."""

    tenant_id: str
    user: str | None
    subject_token: str | None = field(default=None, repr=False)


class InflightCalls:
    """The calls running on one server session right now."""

    def __init__(self) -> None:
        self._calls: dict[int, CallContext] = {}
        # Requests of no execution (prompts/get, resources/read, completion/complete): while
        # one is in flight, a server request may be its, so it is nobody's to answer.
        self._others: dict[int, str] = {}
        # A 2025-11-25 server's task, by its id, while a call waits on it: the server's
        # requests that name it (``related-task``) are that call's, whatever else runs.
        self._tasks: dict[str, CallContext] = {}
        self._ids = itertools.count()

    @contextmanager
    def track(self, context: CallContext | None) -> Iterator[None]:
        """Count ``context`` as in flight for the block (no-op for None)."""
        if context is None:
            yield
            return
        with self._held(self._calls, context):
            yield

    def track_request(self, method: str) -> AbstractContextManager[None]:
        """Count a request outside any execution (``method``) as in flight for the block."""
        return self._held(self._others, method)

    @contextmanager
    def _held(self, table: dict[int, T], value: T) -> Iterator[None]:
        key = next(self._ids)
        table[key] = value
        try:
            yield
        finally:
            del table[key]

    @contextmanager
    def task(self, task_id: str, context: CallContext | None) -> Iterator[None]:
        """For the block, the server's requests related to its task ``task_id`` are
        ``context``'s (no-op for None)."""
        if context is None:
            yield
            return
        self._tasks[task_id] = context
        try:
            yield
        finally:
            self._tasks.pop(task_id, None)

    def of_task(self, task_id: str | None) -> CallContext | None:
        """The call waiting on the server's task ``task_id``, if one is."""
        return None if task_id is None else self._tasks.get(task_id)

    def owner(self) -> CallContext | str:
        """The call a server request belongs to, or why that cannot be told."""
        if self._others:  # never relayed to an execution's client: it may be the other's
            methods = ", ".join(sorted(set(self._others.values())))
            return (
                f"a request outside any execution ({methods}) is in flight on this server "
                "and its request does not say which one it belongs to"
            )
        executions = {c.execution_id for c in self._calls.values()}
        if not executions:
            return "no tool call is in flight on this server"
        if len(executions) > 1:
            return (
                f"{len(executions)} executions have calls in flight on this server and its "
                "request does not say which one it belongs to"
            )
        calls = list(self._calls.values())
        if len(calls) == 1:
            return calls[0]
        # One execution, several of its calls: the execution is certain, the call is not.
        deadlines = [c.deadline for c in calls if c.deadline is not None]
        return CallContext(
            execution_id=calls[0].execution_id,
            tool="",
            deadline=max(deadlines) if len(deadlines) == len(calls) else None,
        )


class Upstream:
    """Publishes tool progress as execution events and relays server requests to the gateway."""

    def __init__(
        self,
        *,
        redis_url: str,
        request_timeout_s: float,
        private: Callable[[str, str, str], str] | None = None,
    ) -> None:
        # ``private(execution_id, tool, message)``: the message with values as tokens.
        self._private = private
        # Blocking reads on the relay wait up to request_timeout_s: no socket timeout.
        self._redis = aioredis.Redis.from_url(redis_url, socket_timeout=None)
        self._sync = redis.Redis.from_url(redis_url, socket_timeout=10)
        self._request_timeout_s = request_timeout_s
        # Each execution's log and progress publications under way (``published``).
        self._publishing: dict[str, set[asyncio.Task[Any]]] = {}

    async def aclose(self) -> None:
        """Close both Redis clients."""
        await self._redis.aclose()
        self._sync.close()

    @contextmanager
    def _publication(self, execution_id: str) -> Iterator[None]:
        """The block publishes an event of ``execution_id``: ``published`` waits for it."""
        task = asyncio.current_task()
        if task is None:
            yield
            return
        tasks = self._publishing.setdefault(execution_id, set())
        tasks.add(task)
        try:
            yield
        finally:
            tasks.discard(task)
            if not tasks:
                self._publishing.pop(execution_id, None)

    async def published(self, context: CallContext, *, timeout_s: float = 1.0) -> None:
        """Wait (bounded) until the log and progress events the server sent during the call
        are published: its reply then never overtakes them (a direct call's caller reads
        the events it missed once the reply is in)."""
        await asyncio.sleep(0)  # a notification handler the reply overtook starts first
        tasks = set(self._publishing.get(context.execution_id, ()))
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def progress(
        self, context: CallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        """One ``notifications/progress`` of a tool call, as a ``tool_progress`` execution event."""
        with self._publication(context.execution_id):
            await self._progress(context, progress, total, message)

    async def _progress(
        self, context: CallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        text = message[:_MAX_PROGRESS_MESSAGE] if message else None
        if text and self._private is not None:
            try:
                text = await asyncio.to_thread(
                    self._private, context.execution_id, context.tool, text
                )
            except Exception as exc:  # no token, no message: it never leaves in clear
                log.warning("progress message of %s dropped: %s", context.tool, exc)
                text = None
        event = {
            "type": TOOL_PROGRESS,
            "call_id": context.trace_call_id,
            "tool": context.tool,
            "progress": progress,
            "total": total,
            "message": text,
        }
        try:
            await asyncio.to_thread(
                publish_event, self._sync, execution_id=context.execution_id, event=event
            )
        except RedisError as exc:  # progress is best effort; the call goes on
            log.warning("could not publish progress of %s: %s", context.tool, exc)

    async def log(self, context: CallContext, level: str, logger: str | None, data: Any) -> None:
        """One ``notifications/message`` of a server during a tool call, as a ``tool_log``
        execution event (its data as text, capped and through privacy like progress)."""
        with self._publication(context.execution_id):
            await self._log(context, level, logger, data)

    async def _log(self, context: CallContext, level: str, logger: str | None, data: Any) -> None:
        text = data if isinstance(data, str) else orjson.dumps(data, default=str).decode()
        text = text[:_MAX_LOG_MESSAGE]
        if self._private is not None:
            try:
                text = await asyncio.to_thread(
                    self._private, context.execution_id, context.tool, text
                )
            except Exception as exc:  # no token, no message: it never leaves in clear
                log.warning("log message of %s dropped: %s", context.tool, exc)
                return
        event = {
            "type": TOOL_LOG,
            "call_id": context.trace_call_id,
            "tool": context.tool,
            "level": level,
            "logger": logger,
            "message": text,
        }
        try:
            await asyncio.to_thread(
                publish_event, self._sync, execution_id=context.execution_id, event=event
            )
        except RedisError as exc:  # best effort, as progress
            log.warning("could not publish a log message of %s: %s", context.tool, exc)

    async def declared(self, context: CallContext) -> list[str] | None:
        """The relayed capabilities the client of ``context``'s execution declared (as read
        with its grant, else read now); None when no MCP client waits on it (or Redis cannot
        say)."""
        if context.declared_read:
            return context.declared
        execution_id = context.execution_id
        try:
            return await upstream.advertised(self._redis, execution_id=execution_id)
        except RedisError as exc:
            log.warning("capabilities of execution %s unknown: %s", execution_id, exc)
            return None

    async def capability_missing(self, execution_id: str, capability: str, server: str) -> None:
        """Record that ``server`` needed a client ``capability`` the execution's client did not
        declare (a ``client_capability_missing`` event: a direct call answers ``-32021``)."""
        event = {"type": CLIENT_CAPABILITY_MISSING, "capability": capability, "server": server}
        try:
            await asyncio.to_thread(
                publish_event, self._sync, execution_id=execution_id, event=event
            )
        except RedisError as exc:  # the refusal stands; the caller sees the tool's failure
            log.warning("could not publish %s: %s", CLIENT_CAPABILITY_MISSING, exc)

    async def downstream_task(self, context: CallContext, server: str) -> None:
        """Record that ``server`` answered the call with a task of its own (a
        ``downstream_task`` event: the gateway answers its client with a task too)."""
        event = {"type": DOWNSTREAM_TASK, "call_id": context.trace_call_id, "server": server}
        try:
            await asyncio.to_thread(
                publish_event, self._sync, execution_id=context.execution_id, event=event
            )
        except RedisError as exc:  # the gateway's grace then decides, as for any server
            log.warning("could not publish %s: %s", DOWNSTREAM_TASK, exc)

    async def relay(
        self,
        *,
        server: str,
        inflight: InflightCalls,
        method: RelayedMethod,
        params: BaseModel | dict[str, Any],
        result_type: type[ResultT],
        call: CallContext | None = None,
        key: str | None = None,
        batch: tuple[str, int] | None = None,
        task: bool = False,
    ) -> ResultT | types.ErrorData:
        """Ask the client of the execution that owns this request; a clear refusal when nobody
        can answer. ``call``: the call that asked, when known (an ``InputRequiredResult`` of a
        2026-07-28 server answers one call); else it is told from the calls in flight.
        ``key``: the server's own key for the question, ``batch`` its result's id and number
        of questions (see ``ClientRequest``)."""
        owner = call or inflight.owner()
        if isinstance(owner, str):
            return _refuse(f"{method} from server {server!r} refused: {owner}")
        capability = CAPABILITY_OF[method]
        try:
            offered = await upstream.advertised(self._redis, execution_id=owner.execution_id)
        except RedisError as exc:
            return _refuse(f"{method} could not be relayed (Redis): {exc}")
        if offered is None or capability not in offered:
            who = (
                "no MCP client is waiting on this execution (REST callers cannot answer)"
                if offered is None
                else f"the MCP client that started it did not declare the {capability} capability"
            )
            message = (
                f"{method} from server {server!r} refused for execution {owner.execution_id}: {who}"
            )
            if offered is None:
                return _refuse(message)
            await self.capability_missing(owner.execution_id, capability, server)
            return _missing_capability(message, capability)
        request = ClientRequest(
            id=upstream.new_request_id(),
            execution_id=owner.execution_id,
            method=method,
            params=params
            if isinstance(params, dict)
            else params.model_dump(by_alias=True, mode="json", exclude_none=True),
            server=server,
            key=key,
            batch=batch[0] if batch else None,
            batch_size=batch[1] if batch else 1,
            task=task,
            tool=owner.tool or None,
            trace_call_id=owner.trace_call_id,
            deadline=min(time.time() + self._request_timeout_s, owner.deadline or float("inf")),
        )
        try:
            reply = await upstream.ask(self._redis, request)
        except (RedisError, ValidationError) as exc:
            return _refuse(f"{method} could not be relayed: {exc}")
        if reply is None:
            return _refuse(
                f"{method}: the MCP client did not answer before the tool call's deadline "
                f"or within {self._request_timeout_s:g}s (AGENTCARDS_MCP_CLIENT_REQUEST_TIMEOUT_S)"
            )
        if reply.error is not None:
            return types.ErrorData(code=reply.error.code, message=reply.error.message)
        try:
            return result_type.model_validate(reply.result or {})
        except ValidationError as exc:
            return _refuse(f"{method}: the MCP client's answer is not a valid result: {exc}")


def roots_result(roots: list[str]) -> types.ListRootsResult:
    """The ``roots/list`` answer: a server's configured roots (file URIs), named by their last path part."""
    return types.ListRootsResult(
        roots=[
            types.Root(uri=FileUrl(uri), name=uri.rstrip("/").rsplit("/", 1)[-1] or uri)
            for uri in roots
        ]
    )


def _missing_capability(message: str, capability: str) -> types.ErrorData:
    """MCP's own refusal (``-32021``, 2026-07-28) for a request the client declared no
    capability for, naming the capability it needs as the spec's ``requiredCapabilities``."""
    log.info("%s", message)
    data = types.MissingRequiredClientCapabilityErrorData(
        required_capabilities=types.ClientCapabilities.model_validate({capability: {}})
    )
    return types.ErrorData(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=message,
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


def _refuse(message: str) -> types.ErrorData:
    log.info("%s", message)
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)
