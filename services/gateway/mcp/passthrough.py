"""``execute_code``, ``execute_capability`` and direct calls over MCP pass the protocol through:
tool progress, sampling and elicitation.

While an MCP client waits on one of them (a direct call: ``call_direct_passing_through``), this relays what the downstream servers
send during the execution's tool calls: their ``notifications/progress`` (as progress on
the client's own token, the message naming the tool and its trace call id) and their
``sampling/createMessage`` / ``elicitation/create`` requests, when the client declared the
capability. A 2026-07-28 client cannot be sent requests: it gets them as an
``InputRequiredResult`` and answers by retrying the call (input_required.py). The toolhost
refuses those requests itself for any other caller (see shared/rpc/upstream.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
from mcp import types
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import CallToolResult
from pydantic import TypeAdapter, ValidationError
from redis.exceptions import RedisError

from services.gateway.mcp import input_required, log_messages, task_input
from services.gateway.mcp.errors import error_result
from services.gateway.mcp.fit import clip_text
from services.gateway.mcp.replicas import calls
from services.gateway.mcp.replicas.registry import session_ttl_s
from services.gateway.mcp.tooling import execution_result
from services.gateway.ops import direct_call
from services.gateway.ops.admission import Admission
from services.gateway.ops.approvals import approval_status
from services.gateway.ops.cancel import cancel_execution
from services.gateway.ops.direct_call import DirectCall
from services.gateway.ops.enqueue import enqueue_admitted
from services.gateway.ops.execution_events import EventFollower, read_events
from services.gateway.ops.execution_reads import read_execution
from services.gateway.ops.wait import wait_for_finish
from services.gateway.state import ASYNC_REDIS_SOCKET_TIMEOUT_S, GatewayState
from shared.approvals.store import EXECUTED
from shared.auth.principal import Principal
from shared.errors import AgentCardsError, ErrorType, NotFound, error_dict
from shared.executions.events import DOWNSTREAM_TASK, TOOL_PROGRESS
from shared.executions.models import view_from_row
from shared.executions.status import TERMINAL
from shared.rpc import upstream
from shared.rpc.upstream import (
    TASKS,
    TASKS_EXTENSION,
    URL_ELICITATION,
    ClientReply,
    ClientRequest,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StillRunning:
    """A run that had not ended when the caller's grace passed (it goes on: an MCP task)."""

    execution_id: str


# What a passed-through run ends in: its row, or (2026-07-28) the questions its tools ask;
# with a grace, perhaps that it is still running.
Ended = dict[str, Any] | types.InputRequiredResult
Outcome = Ended | StillRunning

# The client capability each relayed capability name needs.
_NEEDS = {
    TASKS: types.ClientCapabilities(extensions={TASKS_EXTENSION: {}}),
    "sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "roots": types.ClientCapabilities(roots=types.RootsCapability()),
}
_ELICIT_PARAMS: TypeAdapter[types.ElicitRequestParams] = TypeAdapter(types.ElicitRequestParams)
# How long the listener's BLPOP blocks. Well under the client's socket timeout: when the
# client gave up first (redis-py 8's 5 s default met a 5 s block), a request Redis popped
# just then went to a dropped connection and was lost; the tool waited out its deadline.
_POLL_S = ASYNC_REDIS_SOCKET_TIMEOUT_S / 2
# The client's capabilities are advertised as a lease, renewed while the client waits: the
# relay lasts exactly as long as the wait (which a re-run extends), and ends within
# LEASE_S of a gateway that died mid-wait.
LEASE_S = 5.0
# A downstream server's progress message is relayed up to this size (a notification must fit
# MCP clients' message limit like any reply; see fit.py).
PROGRESS_TEXT_BYTES = 4096
RENEW_EVERY_S = 1.5
# The question loop's poll while its wait may be told to end (a call that may become a task):
# how late, at most, the client hears its task after the grace or the downstream task.
_TOLD_POLL_S = 0.2
# How long one round waits for the rest of a server result's questions (the toolhost relays
# them at once: they arrive within milliseconds).
BATCH_WAIT_S = 2.0
# A direct call that ends within this long has its events read on its end's round trip; a
# longer one's are followed live (a subscription: four round trips) from then on. Its
# server's progress and log lines reach its client at most this late. At 0.05 s, calls of
# 8 sessions at once on a busy 2-core machine mostly outlasted it and paid for following.
QUIET_CALL_S = 0.2
# The _meta key naming where a relayed request came from (see ``origin``).
ORIGIN = "agentcards/origin"


async def run_passing_through(
    state: GatewayState,
    ctx: Context,
    *,
    admission: Admission,
    principal: Principal,
    log_events: bool = True,
    grace_s: float | None = None,
    defer: bool = False,
) -> Outcome:
    """Enqueue an admitted execution and return it once finished (with ``grace_s``: or
    ``StillRunning`` once that long passed after it was enqueued, or at once when a
    downstream server answered with a task of its own; ``defer``: a server that speaks MCP
    Tasks decides alone, no grace); meanwhile its events reach ``ctx``'s client as log
    lines (unless not ``log_events``: a direct call's client sees its tool, not a run) and
    tool progress, and its tools' sampling/elicitation requests as requests (2025-11-25) or
    as an ``InputRequiredResult`` returned instead of the row (2026-07-28: the run keeps
    waiting; see input_required.py). The relay is advertised before the task is sent, so a
    tool that asks at once is never refused as if a REST caller had started it."""
    row = admission.row
    if row["status"] in TERMINAL:  # a cache hit, a repeat of a finished one
        return row
    execution_id = str(row["id"])
    async with (
        relay_client_requests(state, ctx, execution_id=execution_id) as relay,
        _cancelled_with_the_call(state, ctx, execution_id=execution_id, principal=principal),
    ):
        row = await enqueue_admitted(state, admission=admission, principal=principal)
        if row["status"] in TERMINAL:  # code that does not parse fails without a sandbox
            return row
        if task_input.requested.get() is not None:  # 2025-11-25: a task at once, not waited on
            relay.hold_until = time.time() + float(row["timeout_s"])
            return StillRunning(execution_id=str(row["id"]))
        tasked = asyncio.Event() if grace_s is not None else None
        waiting = _wait(
            state, ctx, relay, row=row, principal=principal, log_events=log_events, tasked=tasked
        )
        if tasked is None:
            return await waiting
        return await _bounded(
            waiting, relay, row=row, tasked=tasked, grace_s=None if defer else grace_s
        )


async def _bounded(
    waiting: Coroutine[Any, Any, Ended | StillRunning],
    relay: Relay,
    *,
    row: dict[str, Any],
    tasked: asyncio.Event,
    grace_s: float | None,
) -> Outcome:
    """``waiting``'s outcome, or ``StillRunning`` once ``grace_s`` passed (None: no limit) or
    a downstream server made a task (``tasked``): only the wait ends, the run goes on, its
    client's capabilities advertised for as long as it may run (its task's questions).

    The wait is told to end (``tasked`` set) rather than cancelled: a cancelled BLPOP of the
    run's questions could take a question off the relay's queue for nobody, and its tool
    would wait for an answer until its deadline. The 2026-07-28 question loop polls in
    short steps while it may be told to end (``_TOLD_POLL_S``) and returns at the next one."""
    ended = asyncio.ensure_future(waiting)
    flagged = asyncio.ensure_future(tasked.wait())
    try:
        await asyncio.wait({ended, flagged}, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
        tasked.set()
        if not relay.stateless:  # no question loop: nothing popped, nothing to lose
            ended.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ended
    finally:
        for future in (ended, flagged):
            if not future.done():
                future.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await future
    if not ended.cancelled() and not isinstance(ended.result(), StillRunning):
        return ended.result()  # it ended, or asked its client, just then
    relay.hold_until = time.time() + float(row["timeout_s"])
    return StillRunning(execution_id=str(row["id"]))


async def resume_passing_through(
    state: GatewayState,
    ctx: Context,
    *,
    pending: input_required.Pending,
    principal: Principal,
    log_events: bool = True,
    grace_s: float | None = None,
    defer: bool = False,
) -> Outcome:
    """A 2026-07-28 client's retry after an ``InputRequiredResult``: its answers go to the
    waiting tools, then the same execution is waited on again (``grace_s`` and ``defer`` as
    for ``run_passing_through``)."""
    await input_required.deliver(state, pending, ctx.input_responses)
    row = await read_execution(
        state, execution_id=pending.execution_id, tenant_id=principal.tenant_id
    )
    if row["status"] in TERMINAL:
        return row
    async with (
        relay_client_requests(state, ctx, execution_id=pending.execution_id) as relay,
        _cancelled_with_the_call(
            state, ctx, execution_id=pending.execution_id, principal=principal
        ),
    ):
        tasked = asyncio.Event() if grace_s is not None else None
        waiting = _wait(
            state, ctx, relay, row=row, principal=principal, log_events=log_events,
            heard=pending.heard, tasked=tasked,
        )  # fmt: skip
        if tasked is None:
            return _ended(await waiting)
        return await _bounded(
            waiting, relay, row=row, tasked=tasked, grace_s=None if defer else grace_s
        )


def _ended(outcome: Ended | StillRunning) -> Ended:
    """A wait's outcome where no task can have been made (it was not given ``tasked``)."""
    assert not isinstance(outcome, StillRunning)  # only a wait told of a task returns it
    return outcome


async def resume_interrupted(
    state: GatewayState, ctx: Context, *, principal: Principal
) -> Ended | None:
    """A call this session's previous owner was waiting on when it died (re-sent by the
    replica that took the session over): the same execution waited on again, its events
    passed on from the first one the client was not sent. None for any other call."""
    found = await calls.interrupted(state.aredis, ctx)
    if found is None:
        return None
    execution_id, after_seq = found
    row = await read_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    if row["status"] in TERMINAL:  # it ended meanwhile: what the client missed is in its log
        forward = _Forwarder(ctx, log_events=True, heard=after_seq)
        for event in await read_events(state, execution_id=execution_id):
            await forward(event)
        await calls.forget(state.aredis, ctx)  # answered now: not re-sent on a next take-over
        return row
    async with (
        relay_client_requests(state, ctx, execution_id=execution_id) as relay,
        _cancelled_with_the_call(state, ctx, execution_id=execution_id, principal=principal),
    ):
        return _ended(
            await _wait(
                state, ctx, relay, row=row, principal=principal, log_events=True, heard=after_seq
            )
        )


@contextlib.asynccontextmanager
async def _cancelled_with_the_call(
    state: GatewayState, ctx: Context, *, execution_id: str, principal: Principal
) -> AsyncIterator[None]:
    """The client's ``notifications/cancelled`` for the call cancels its execution (as
    ``POST /v1/executions/{id}/cancel`` does); any other end of the wait (the gateway
    stopping, the session ending) leaves the run going, for whoever reads it next, and the
    call on record (calls.py) for a replica that takes the session over."""
    ttl_s = _calls_ttl_s(state)
    try:
        async with calls.remembered(state.aredis, ctx, execution_id=execution_id, ttl_s=ttl_s):
            yield
    except asyncio.CancelledError:
        if calls.client_cancelled(ctx):
            log.info("execution %s: its MCP client cancelled the call", execution_id)
            with anyio.CancelScope(shield=True), contextlib.suppress(AgentCardsError, RedisError):
                await cancel_execution(
                    state, execution_id=execution_id, tenant_id=principal.tenant_id
                )
        raise


def on_record(state: GatewayState, ctx: Context) -> calls.SessionCall | None:
    """How a new direct call is kept on its session's record (``call_direct_passing_through``
    with ``kept``): on its admission's and its end's round trips."""
    return calls.session_call(ctx, ttl_s=_calls_ttl_s(state))


def _calls_ttl_s(state: GatewayState) -> int:
    """How long a session's calls stay on record: as long as the session."""
    settings = state.settings
    return session_ttl_s(
        idle_s=settings.mcp_session_idle_s, replica_ttl_s=settings.mcp_replica_ttl_s
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PausedDirect:
    """A direct call whose gateway died while it waited for a person's answer: it goes on
    here as the same execution (its approval's row says it was never sent: docs/policy.md)."""

    execution_id: str


async def resume_interrupted_direct(
    state: GatewayState, ctx: Context, *, principal: Principal
) -> dict[str, Any] | CallToolResult | PausedDirect | None:
    """A direct call this session's previous owner was running when it died (re-sent by the
    replica that took the session over): its row when it was recorded (its events passed on
    from the first one the client was not sent); ``PausedDirect`` when it was waiting for
    approval and never sent (its approval not yet ``executed``); else the tool error that
    says its outcome is unknown; None for any other call. Never called twice: a tool call
    may have effects."""
    found = await calls.interrupted(state.aredis, ctx)
    if found is None:
        return None
    execution_id, after_seq = found
    try:
        row = await read_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)
    except NotFound:
        status = await approval_status(
            state, execution_id=execution_id, call_id=direct_call.CALL_ID,
            tenant_id=principal.tenant_id,
        )  # fmt: skip
        if status is not None and status != EXECUTED:  # not sent: it goes on (once) here
            log.info("direct call %s: its wait for approval goes on here", execution_id)
            return PausedDirect(execution_id)
        await calls.forget(state.aredis, ctx)  # answered now: not re-sent on a next take-over
        return error_result(
            error_dict(
                ErrorType.WORKER_LOST,
                "the gateway replica running this direct call stopped before it ended; the "
                "tool may have run on its server and is not called again",
                details={"execution_id": execution_id},
            )
        )
    forward = _Forwarder(ctx, log_events=False, heard=after_seq)
    for event in await read_events(state, execution_id=execution_id):
        await forward(event)
    await calls.forget(state.aredis, ctx)
    return row


async def _wait(
    state: GatewayState,
    ctx: Context,
    relay: Relay,
    *,
    row: dict[str, Any],
    principal: Principal,
    log_events: bool,
    heard: int = 0,
    tasked: asyncio.Event | None = None,
) -> Ended | StillRunning:
    """The run's end; for a 2026-07-28 client, whichever comes first of its end and a question
    from one of its tools (then returned as an ``InputRequiredResult``; ``StillRunning``
    when a downstream server's task asked it). Events up to ``heard`` reached the client in
    an earlier round; ``tasked`` is set when a downstream server answers with a task."""
    execution_id = str(row["id"])
    forward = _Forwarder(ctx, log_events=log_events, heard=heard, tasked=tasked)
    finishing = wait_for_finish(
        state,
        execution_id=execution_id,
        timeout_s=float(row["timeout_s"]),
        on_event=forward,
        submitted=row,
        after_seq=heard,
    )
    return await _until_asked(
        state, relay, finishing, execution_id=execution_id, principal=principal, forward=forward
    )


@dataclasses.dataclass
class _Forwarder:
    """What the client hears of the run's events: log lines (unless not ``log_events``: a
    direct call's client hears only what its server logged) and tool progress; ``heard`` is
    the last event passed on, which a 2026-07-28 client's next round starts after."""

    ctx: Context
    log_events: bool
    heard: int = 0
    tasked: asyncio.Event | None = None

    async def __call__(self, event: dict[str, Any]) -> None:
        seq = int(event.get("seq") or 0)
        if seq and seq <= self.heard:
            return
        if event.get("type") == DOWNSTREAM_TASK and self.tasked is not None:
            self.tasked.set()
        # Each notification names its event: a replica taking the session over goes on after it.
        token = calls.RUN_EVENT.set(seq or None)
        try:
            if self.log_events:
                await log_messages.forward_event(self.ctx, event)
            else:  # a direct call: only what its server logged
                await log_messages.forward_tool_log(self.ctx, event)
            await forward_progress(self.ctx, event)
        finally:
            calls.RUN_EVENT.reset(token)
        self.heard = max(self.heard, seq)


async def _until_asked(
    state: GatewayState,
    relay: Relay,
    finishing: Coroutine[Any, Any, dict[str, Any]],
    *,
    execution_id: str,
    principal: Principal,
    forward: _Forwarder,
) -> Ended | StillRunning:
    """``finishing``'s row; for a 2026-07-28 client, whichever comes first of it and a
    question from one of the run's tools (then returned as an ``InputRequiredResult``; a
    question of a downstream server's task is its task's, so ``StillRunning``)."""
    if not relay.stateless:
        return await finishing
    finished = asyncio.create_task(finishing)
    asked = asyncio.create_task(_questions(state, execution_id, told=forward.tasked))
    try:
        await asyncio.wait({finished, asked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (finished, asked):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if finished.done() and not finished.cancelled():
        return finished.result()  # (a question popped just as the run ended waits for no one)
    if (popped := asked.result()) is None:  # told to end: the run goes on as a task
        return StillRunning(execution_id=execution_id)
    questions, requests = popped
    if any(r.task for r in requests) and forward.tasked is not None:
        await task_input.park(state, requests)
        return StillRunning(execution_id=execution_id)
    # The client is still there, between two rounds: keep its lease until the tools stop waiting.
    relay.hold_until = min(r.deadline for r in requests)
    origins = {r.key or r.id: origin(r) for r in requests}
    result = input_required.ask(
        questions, requests, tenant_id=principal.tenant_id, heard=forward.heard
    )
    # The embedded requests carry no _meta at 2026-07-28: the origins ride the result's.
    return result.model_copy(update={"meta": {ORIGIN: origins}})


async def call_direct_passing_through(
    state: GatewayState,
    ctx: Context,
    *,
    call: DirectCall | None,
    principal: Principal,
    pending: input_required.Pending | None,
) -> Ended:
    """One admitted direct call (``call``: ``direct.find_and_admit``, its relay advertised as
    ``relay_of(ctx)``; ``ops/direct_call.py``: no sandbox, no queue) to its end, or a
    2026-07-28 client's retry of one (``pending``, no ``call``); meanwhile its server's log
    lines and progress reach ``ctx``'s client, and its sampling/elicitation requests as for a
    sandbox run (``run_passing_through``). The client cancelling it ends the call, recorded
    `cancelled`."""
    start: Callable[[], asyncio.Task[dict[str, Any]]]
    if pending is not None:
        await input_required.deliver(state, pending, ctx.input_responses)
        execution_id = pending.execution_id
        running = state.direct_flights.get(execution_id)
        if running is None:  # it ended meanwhile (or runs on another gateway)
            return await _ended_direct(state, execution_id=execution_id, principal=principal)
        start = lambda: running  # noqa: E731
        heard = pending.heard
    else:
        if call is None:
            raise ValueError("a direct call that is not a retry needs its admitted call")
        if call.hit is not None:
            return call.hit
        admitted = call
        execution_id = call.execution_id
        start = lambda: direct_call.start(state, admitted)  # noqa: E731
        heard = 0
    async with (
        relay_client_requests(
            state,
            ctx,
            execution_id=execution_id,
            advertised=pending is None,
            withdraw=False,
            sandbox=False,
        ) as relay,
        # On record while it runs, for the replica that takes a session over if this one dies
        # (a new call: put there by its admission, taken off by its end, ``on_record``).
        calls.remembered(
            state.aredis,
            ctx,
            execution_id=execution_id,
            ttl_s=_calls_ttl_s(state),
            kept=pending is None,
        ),
    ):
        flight = start()  # the relay is advertised before the tool can ask
        forward = _Forwarder(ctx, log_events=False, heard=heard)
        following = _follow_flight(
            state, flight, execution_id=execution_id, forward=forward, call=call
        )
        try:
            return _ended(
                await _until_asked(
                    state, relay, following, execution_id=execution_id, principal=principal,
                    forward=forward,
                )
            )  # fmt: skip
        except asyncio.CancelledError:  # the client cancelled the call: so is the tool call
            flight.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(flight), timeout=5)
            raise


async def call_direct_as_task(
    state: GatewayState,
    ctx: Context,
    *,
    call: DirectCall,
    principal: Principal,
    grace_s: float,
    defer: bool = False,
) -> Outcome:
    """An admitted direct call a client may get as an MCP task (``call``: ``find_and_admit``,
    no relay: advertised here, with ``tasks``, as for a sandbox run): made a task's call (``direct_call.begin_task``: its running row
    and lease), run without a sandbox, its end recorded by the toolhost; waited on as
    ``run_passing_through`` waits on a run (``grace_s``, ``defer``, a 2025-11-25 task at
    once), its server's log lines, progress and questions passed on meanwhile. A run still
    going is ``StillRunning``: this gateway follows it on; any other reads its row."""
    if call.hit is not None:
        return call.hit
    execution_id = call.execution_id
    row = {"id": execution_id, "timeout_s": call.admission.timeout_s}
    async with (
        # The toolhost waits on a server's own task itself, as for a sandbox run; the end
        # it records withdraws the relay.
        relay_client_requests(state, ctx, execution_id=execution_id, withdraw=False) as relay,
        _cancelled_with_the_call(state, ctx, execution_id=execution_id, principal=principal),
    ):  # fmt: skip
        await direct_call.begin_task(state, call)
        flight = direct_call.start(state, call)  # the relay is advertised before it can ask
        if task_input.requested.get() is not None:  # 2025-11-25: a task at once, not waited on
            relay.hold_until = time.time() + call.admission.timeout_s
            return StillRunning(execution_id=execution_id)
        tasked = asyncio.Event()
        forward = _Forwarder(ctx, log_events=False, tasked=tasked)
        following = _follow_flight(
            state, flight, execution_id=execution_id, forward=forward, call=call
        )
        waiting = _until_asked(
            state, relay, following, execution_id=execution_id, principal=principal,
            forward=forward,
        )  # fmt: skip
        return await _bounded(
            waiting, relay, row=row, tasked=tasked, grace_s=None if defer else grace_s
        )


async def _follow_flight(
    state: GatewayState,
    flight: asyncio.Future[dict[str, Any]],
    *,
    execution_id: str,
    forward: _Forwarder,
    call: DirectCall | None = None,
) -> dict[str, Any]:
    """The direct call's row once it ends, its server's log lines and progress passed on
    (``forward``; cancelling this leaves the call running). A call that ends within
    ``QUIET_CALL_S`` has its events read once from its log after its end (the toolhost
    publishes them before it replies; ``call``, run here, read them on its end's round
    trip); a longer one is followed live from then on."""
    on_event = forward
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(flight), timeout=QUIET_CALL_S)
    if flight.done():
        logged = call.logged if call is not None else None
        if logged is None:
            logged = await read_events(state, execution_id=execution_id)
        for past in logged:
            await on_event(past)
        return flight.result()
    async with EventFollower(state, execution_id=execution_id, after_seq=forward.heard) as events:
        while not flight.done():
            heard = asyncio.ensure_future(events.next(timeout_s=_POLL_S))
            either: set[asyncio.Future[Any]] = {flight, heard}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not heard.done():
                    heard.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await heard
            if heard.done() and not heard.cancelled() and (event := heard.result()) is not None:
                await on_event(event)
        await events.catch_up()
        while (event := await events.next(timeout_s=0)) is not None:
            await on_event(event)
    return await asyncio.shield(flight)


async def _ended_direct(
    state: GatewayState, *, execution_id: str, principal: Principal
) -> dict[str, Any]:
    """A direct call that is not running here: its row as stored, or as its end carried it."""
    return await read_execution(state, execution_id=execution_id, tenant_id=principal.tenant_id)


async def _questions(
    state: GatewayState, execution_id: str, *, told: asyncio.Event | None = None
) -> tuple[dict[str, types.InputRequest], list[ClientRequest]] | None:
    """The next request(s) of the execution's tools to its client, as embedded input requests
    (one that is not a valid MCP request is refused to its server at once); None once
    ``told`` is set (checked between short polls, never by cancelling one)."""
    while True:
        if told is not None and told.is_set():
            return None
        first = await _next(state, execution_id, poll_s=_POLL_S if told is None else _TOLD_POLL_S)
        if first is None:
            continue
        requests = await _with_batches(state, execution_id, first)
        questions: dict[str, types.InputRequest] = {}
        asked: list[ClientRequest] = []
        for request in requests:
            outgoing = client_request(request)
            if isinstance(outgoing, ClientReply):
                await upstream.answer(state.aredis, outgoing)
                continue
            # Under the server's own key when it chose one (a 2026-07-28 server's
            # InputRequiredResult) and no other question of this round has it.
            key = request.key if request.key and request.key not in questions else request.id
            questions[key] = outgoing[0]
            asked.append(request.model_copy(update={"key": key}))
        if questions:
            return questions, asked


async def _with_batches(
    state: GatewayState, execution_id: str, first: ClientRequest
) -> list[ClientRequest]:
    """``first`` and the requests already queued behind it, waiting (up to BATCH_WAIT_S) for
    the rest of any server result's batch, so that one result's questions make one round."""
    requests = [first]
    until = time.monotonic() + BATCH_WAIT_S
    try:
        requests += await upstream.drain(state.aredis, execution_id=execution_id)
        while _incomplete(requests) and (left := until - time.monotonic()) > 0:
            more = await upstream.next_request(
                state.aredis, execution_id=execution_id, timeout_s=left
            )
            if more is None:
                break
            requests.append(more)
    except (RedisError, ValidationError) as exc:  # the rest come in the next round
        log.warning("relay for execution %s: %s", execution_id, exc)
    return requests


def _incomplete(requests: list[ClientRequest]) -> bool:
    """True when a batch of ``requests`` lacks some of its questions."""
    sizes = {r.batch: r.batch_size for r in requests if r.batch is not None}
    counted = collections.Counter(r.batch for r in requests if r.batch is not None)
    return any(counted[batch] < size for batch, size in sizes.items())


async def _next(
    state: GatewayState, execution_id: str, *, poll_s: float = _POLL_S
) -> ClientRequest | None:
    """One request of the execution's tools for its client, or None after a poll."""
    try:
        return await upstream.next_request(
            state.aredis, execution_id=execution_id, timeout_s=poll_s
        )
    except (RedisError, ValidationError) as exc:
        log.warning("relay for execution %s: %s", execution_id, exc)
        await asyncio.sleep(1.0)
        return None


async def run_as_tool(
    state: GatewayState,
    ctx: Context,
    *,
    admission: Admission,
    principal: Principal,
    grace_s: float | None = None,
) -> CallToolResult | types.InputRequiredResult | StillRunning:
    """``execute_code`` and ``execute_capability`` end alike: the admitted run passed through
    while it runs, then its outcome logged to the client and returned as the tool's result
    (``StillRunning`` when ``grace_s`` passed first: see mcp/tasks.py)."""
    outcome = await run_passing_through(
        state, ctx, admission=admission, principal=principal, grace_s=grace_s
    )
    if isinstance(outcome, StillRunning):
        return outcome
    return await _as_tool(state, ctx, outcome)


async def resume_as_tool(
    state: GatewayState, ctx: Context, *, principal: Principal
) -> CallToolResult | types.InputRequiredResult | None:
    """``run_as_tool`` for a 2026-07-28 client's retry, or for a call a replica that died was
    waiting on (None: the call is neither)."""
    pending = input_required.pending_of(ctx.request_state, principal=principal)
    if pending is not None:
        outcome = _ended(
            await resume_passing_through(state, ctx, pending=pending, principal=principal)
        )
    elif (interrupted := await resume_interrupted(state, ctx, principal=principal)) is not None:
        outcome = interrupted
    else:
        return None
    return await _as_tool(state, ctx, outcome)


async def _as_tool(
    state: GatewayState, ctx: Context, outcome: Ended
) -> CallToolResult | types.InputRequiredResult:
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    view = view_from_row(outcome)
    await log_messages.send_outcome(ctx, view)
    return execution_result(view, max_bytes=state.settings.mcp_reply_max_bytes)


async def forward_progress(ctx: Context, event: dict[str, Any]) -> None:
    """A ``tool_progress`` event as progress on the caller's token (other events: nothing)."""
    if event.get("type") != TOOL_PROGRESS:
        return
    progress = float(event.get("progress") or 0)
    total = float(event["total"]) if event.get("total") is not None else None
    done = event.get("message") or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
    message = clip_text(str(done), max_bytes=PROGRESS_TEXT_BYTES, rest="the tool's own message")
    await log_messages.report_progress(
        ctx, progress, total, f"{event.get('tool')} {event.get('call_id')}: {message}"
    )


def relay_of(ctx: Context) -> tuple[list[str], float]:
    """What a direct call's admission advertises for its relay: the capabilities ``ctx``'s
    client relays, and their lease."""
    return client_capabilities(ctx), LEASE_S


def client_capabilities(ctx: Context) -> list[str]:
    """Which relayed capabilities (sampling, elicitation) the calling client declared, and
    ``tasks`` when it declared MCP Tasks (its call may wait on a downstream server's task)."""
    session = ctx.session
    offered = [name for name, needed in _NEEDS.items() if session.check_client_capability(needed)]
    declared = session.client_capabilities
    if declared is not None and declared.elicitation is not None and declared.elicitation.url:
        offered.append(URL_ELICITATION)  # a person may be asked to connect a server (URL mode)
    return offered


@dataclasses.dataclass
class Relay:
    """The relay of one ``tools/call``: ``stateless`` for a 2026-07-28 client (its questions
    are returned, not sent); ``hold_until`` set when the call ends with questions pending."""

    stateless: bool
    hold_until: float | None = None


@contextlib.asynccontextmanager
async def relay_client_requests(
    state: GatewayState,
    ctx: Context,
    *,
    execution_id: str,
    advertised: bool = False,
    withdraw: bool = True,
    sandbox: bool = True,
) -> AsyncIterator[Relay]:
    """While the block runs, answer the execution's sampling/elicitation requests through
    ``ctx``'s client (at 2026-07-28 the block returns them; see ``_wait``). A direct call
    advertises the relay with its admission (``advertised``) and withdraws it when it ends
    (not ``withdraw``): ``ops/direct_call.py``. A sandbox run waits on a downstream server's
    task itself, so its tools' servers may answer with one whoever its client is (``tasks``
    advertised); a direct call only when its client declared MCP Tasks."""
    capabilities = sorted({*client_capabilities(ctx), *([TASKS] if sandbox else [])})
    relay = Relay(stateless=input_required.applies(ctx.protocol_version))
    # Advertised even when empty: the toolhost's refusal then names the missing capability.
    try:
        if not advertised:
            await upstream.advertise(
                state.aredis, execution_id=execution_id, capabilities=capabilities, ttl_s=LEASE_S
            )
    except RedisError as exc:  # not fatal: the enqueue that follows fails (and rejects the
        # row) if Redis is down, and the renewal below retries if it was a blip
        log.warning("relay for execution %s: not advertised: %s", execution_id, exc)
    tasks = [asyncio.create_task(_renew(state, execution_id, capabilities))]
    # A 2025-11-25 call made a task at once: its questions wait for the task's tasks/result.
    if capabilities and not relay.stateless and task_input.requested.get() is None:
        tasks.append(asyncio.create_task(_listen(state, ctx, execution_id)))
    try:
        yield relay
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(RedisError):
            if relay.hold_until is None:
                if withdraw:
                    await upstream.withdraw(state.aredis, execution_id=execution_id)
            else:  # until the client's retry renews it (or the waiting tools give up)
                await upstream.advertise(
                    state.aredis,
                    execution_id=execution_id,
                    capabilities=capabilities,
                    ttl_s=max(LEASE_S, relay.hold_until - time.time()),
                )


async def _renew(state: GatewayState, execution_id: str, capabilities: list[str]) -> None:
    while True:
        await asyncio.sleep(RENEW_EVERY_S)
        try:
            await upstream.advertise(
                state.aredis, execution_id=execution_id, capabilities=capabilities, ttl_s=LEASE_S
            )
        except RedisError as exc:  # the next renewal tries again; requests meanwhile refused
            log.warning("relay for execution %s: lease not renewed: %s", execution_id, exc)


async def _listen(state: GatewayState, ctx: Context, execution_id: str) -> None:
    while True:
        try:
            request = await upstream.next_request(
                state.aredis, execution_id=execution_id, timeout_s=_POLL_S
            )
        except (RedisError, ValidationError) as exc:
            log.warning("relay for execution %s: %s", execution_id, exc)
            await asyncio.sleep(1.0)
            continue
        if request is None:
            continue
        reply = await _ask_client(ctx, request)
        try:
            await upstream.answer(state.aredis, reply)
        except RedisError as exc:  # the toolhost then times out and says so
            log.warning("could not deliver the client's answer %s: %s", request.id, exc)


def origin(request: ClientRequest) -> dict[str, Any]:
    """Where a request came from, for a client that shows it: the server, the tool, its call."""
    return {
        "server": request.server,
        "tool": request.tool,
        "call_id": request.trace_call_id,
        "execution_id": request.execution_id,
    }


def client_request(
    request: ClientRequest,
) -> (
    tuple[
        types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest,
        type[types.Result],
    ]
    | ClientReply
):
    """The MCP request (and its result type) to put to the client, the origin in its
    ``_meta``; a refusal for the server when its params are not a valid request."""
    meta = {ORIGIN: origin(request)}
    params = {**request.params, "_meta": {**request.params.get("_meta", {}), **meta}}
    try:
        if request.method == "sampling/createMessage":
            sampling = types.CreateMessageRequestParams.model_validate(params)
            return types.CreateMessageRequest(params=sampling), types.CreateMessageResult
        if request.method == "roots/list":
            roots = types.RequestParams.model_validate(params)
            return types.ListRootsRequest(params=roots), types.ListRootsResult
        elicit = _ELICIT_PARAMS.validate_python(params)
        return types.ElicitRequest(params=elicit), types.ElicitResult
    except ValidationError as exc:
        return ClientReply.refusal(request.id, types.INVALID_PARAMS, f"{request.method}: {exc}")


async def _ask_client(ctx: Context, request: ClientRequest) -> ClientReply:
    """Send the request to the MCP client on the ``execute_code`` call's stream; its answer or error."""
    return await ask_client(ctx.session, request, request_id=ctx.request_context.request_id)


async def ask_client(
    session: Any,
    request: ClientRequest,
    *,
    request_id: Any,
    meta: dict[str, Any] | None = None,
) -> ClientReply:
    """Send the request to the MCP client on the stream of its request ``request_id`` (with
    ``meta`` added to its ``_meta``); its answer or error."""
    remaining = request.deadline - time.time()
    if meta:
        params = request.params
        params = {**params, "_meta": {**params.get("_meta", {}), **meta}}
        outgoing = client_request(request.model_copy(update={"params": params}))
    else:
        outgoing = client_request(request)
    if isinstance(outgoing, ClientReply):
        return outgoing
    message, result_type = outgoing
    try:
        result = await session.send_request(
            message,
            result_type,
            request_read_timeout_seconds=max(0.1, remaining),
            metadata=ServerMessageMetadata(related_request_id=request_id),
        )
    except MCPError as exc:
        return ClientReply.refusal(request.id, exc.error.code, exc.error.message)
    except Exception as exc:  # a timeout, a closed stream: the server gets an error, not silence
        log.warning("relaying %s to the MCP client failed: %r", request.method, exc)
        return ClientReply.refusal(
            request.id, types.INTERNAL_ERROR, f"the MCP client did not answer: {exc!r}"
        )
    return ClientReply(
        id=request.id, result=result.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
