"""A direct call's run: gateway → RPC channel → toolhost → server and back, no sandbox, no queue.

A direct call (``ops/direct.py``) is an execution of one tool, recorded as one, but it runs
here: admitted like any submission (``admission.admit_direct``: sizes, the key's rate limits,
the result cache), granted its one tool (the grant record the toolhost checks, as for a
sandbox run), its arguments' tokens given their values and its result tokenised
(``shared.sandbox.privacy``, as the sandbox's privacy stage does), the tool called over
the RPC channel (``state.rpc``) with the sandbox bridge's checks of arguments and result
(``shared.sandbox.bridge``), the servers it may have written invalidated in the result
cache before it is answered and its result cached after (``shared.cache.runs``), its end
announced (``shared.executions.announce``). Its record (executions row, audit row) is
appended to a Redis stream on that same round trip, before the answer goes out (which also
reads the call's events' log, for its client), and
written to Postgres by a drainer (``shared.direct``), which then tells learning.

No thread hop when nothing needs one (the tool found and the call admitted on the event
loop: ``direct.find_and_admit``, else in one hop; its end takes one only for the vault rows
of tokens it handed out, the invalidation of a server it may have written, or a result to
cache), and Redis round trips: the slot and cache lookup, the RPC (its grant and the session's last tool sent ahead of its push, on the same
round trip), one for the record and announce.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import redis
from anyio import to_thread
from redis.exceptions import RedisError

from services.gateway.ops.admission import DirectAdmission
from services.gateway.ops.approvals import close_abandoned
from services.gateway.ops.execution_reads import read_execution
from services.gateway.ops.wait import wait_for_finish
from services.gateway.state import GatewayState
from shared import metrics, telemetry
from shared.approvals.wait import await_answer
from shared.auth import limits
from shared.auth.grants import GRANT_RUN_SLACK_S, Grant
from shared.auth.principal import Principal
from shared.direct import finish
from shared.direct.records import write_started
from shared.dispatch import send_ingests
from shared.errors import DependencyError, ErrorType, error_dict
from shared.executions.liveness import lease_worker
from shared.executions.models import ExecutionRequest
from shared.executions.status import TERMINAL
from shared.executions.trace import TraceRecorder
from shared.privacy.tokens import Tokenizer, tokens_in
from shared.queues import direct_lease_key, direct_session_key, grant_key
from shared.rpc import upstream
from shared.rpc.client import Ahead
from shared.rpc.protocol import RpcReply
from shared.sandbox import privacy as private
from shared.sandbox.bridge import argument_refusal, served
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.spans import ended, tool_call_span
from shared.sandbox.tools import ToolResult

log = logging.getLogger(__name__)

Row = dict[str, Any]

# A direct call's one tool call, as the trace of the one line of code it stands for names it.
CALL_ID = "call-1"
# A direct session's last tool is kept this long after its last call (an idle gap longer
# than this starts a new sequence).
SESSION_TTL_S = 3600
EXECUTION_ID = "agentcards.execution.id"
# A task's call must reach a toolhost within this long of its start (the toolhost then renews
# its lease), else its task ends worker_lost: no toolhost took it.
TASK_LEASE_START_S = 30


class OnRecord(Protocol):
    """A call its MCP session keeps on record while it runs (``mcp/replicas/calls.py``), for a
    replica taking the session over: put there with the admission, taken off with the end."""

    def queue_keep(self, pipe: Any, *, execution_id: str) -> None: ...

    def queue_forget(self, pipe: Any) -> None: ...


@dataclass
class DirectCall:
    """One admitted direct call: the execution it is, its tool, its caller, its admission."""

    execution_id: str
    tool_id: str
    pii_kinds: frozenset[str] | None  # its server's "pii" setting (None: every kind)
    input_schema: dict[str, Any] | None
    principal: Principal
    request: ExecutionRequest
    admission: DirectAdmission
    extras: dict[str, Any]
    created_at: float = field(default_factory=time.time)
    trace_id: str | None = None
    on_record: OnRecord | None = None
    # Its events' log as its end's round trip read it (its server's log lines and progress,
    # then its end): None until then, or when that read failed.
    logged: list[dict[str, Any]] | None = None
    # Made as an MCP task (``begin_task``): the toolhost records its end once it is sent.
    task: bool = False
    sent: bool = False
    # Its admission's batch (a call that runs: its grant first), sent ahead of its push on
    # the RPC's round trip (``_send_ahead`` otherwise); the session's reply at ``session_at``.
    ahead: Ahead = field(default_factory=lambda: Ahead([]))
    session_at: int | None = None

    @property
    def hit(self) -> Row | None:
        """The recorded cache hit that answers it (None: it runs)."""
        return self.admission.hit

    @property
    def end(self) -> finish.CallEnd:
        """What its end needs of it (``shared.direct.finish``; a call that runs)."""
        cache = self.admission.cache
        assert cache is not None  # a call that runs read it at admission
        principal = self.principal
        return finish.CallEnd(
            execution_id=self.execution_id,
            tool_id=self.tool_id,
            pii_kinds=self.pii_kinds,
            tenant_id=principal.tenant_id,
            key_id=principal.key_id,
            user=principal.user,
            pii_off=principal.pii_off,
            code=self.request.code,
            args=self.request.args,
            timeout_s=self.admission.timeout_s,
            extras=self.extras,
            created_at=self.created_at,
            trace_id=self.trace_id,
            cache=cache,
            slot=self.admission.slot,
        )


async def admit(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    admission: DirectAdmission,
    tool_id: str,
    server: str,
    pii_kinds: frozenset[str] | None,
    input_schema: dict[str, Any] | None,
    principal: Principal,
    session_id: str | None,
    relay: tuple[list[str], float] | None = None,
    on_record: OnRecord | None = None,
    execution_id: str | None = None,
) -> DirectCall:
    """A direct call of ``tool_id`` admitted (``admission``: ``admission.admit_direct``,
    perhaps a cache hit), with one batch: its grant, its MCP session's last tool
    (``extras.direct.after``), its count, (``relay``: capabilities, lease) the relay of
    its server's requests to its client, withdrawn when the call ends, and (``on_record``)
    the call on its session's record while it runs. A call that runs sends that batch on its
    RPC's round trip, ahead of its push (the toolhost reads the grant once it pops the call;
    a grant Redis refused makes the toolhost refuse the call); a hit sends it now.
    ``execution_id``: the execution it goes on with (a call paused for approval whose
    gateway died, ``passthrough.PausedDirect``)."""
    hit = admission.hit
    execution_id = str(hit["id"]) if hit is not None else execution_id or str(uuid.uuid4())
    pipe = state.aredis.pipeline(transaction=False)
    if hit is None:
        grant = Grant.for_principal(principal, tools=[tool_id], surface="direct")
        ttl = int(admission.timeout_s) + GRANT_RUN_SLACK_S
        pipe.set(grant_key(execution_id), grant.encode(), ex=ttl)
    session = (
        None if session_id is None else direct_session_key(principal.tenant_id, session_id[:128])
    )
    if session is not None:
        pipe.set(session, tool_id, ex=SESSION_TTL_S, get=True)
    if relay is not None and hit is None:  # no call, no server request to relay
        upstream.queue_advertise(
            pipe, execution_id=execution_id, capabilities=relay[0], ttl_s=relay[1]
        )
    if on_record is not None and hit is None:  # a hit is answered at once: nothing runs
        on_record.queue_keep(pipe, execution_id=execution_id)
    # configured servers only reach here: a bounded label
    metrics.incr_labelled(cast(redis.Redis, pipe), "direct_calls_total", server)
    call = DirectCall(
        execution_id=execution_id,
        tool_id=tool_id,
        pii_kinds=pii_kinds,
        input_schema=input_schema,
        principal=principal,
        request=request,
        admission=admission,
        extras={"direct": {"session": session_id, "after": None, "tool": tool_id}},
        trace_id=telemetry.current_trace_id(),
        on_record=on_record if hit is None else None,
        ahead=Ahead([args for args, _ in pipe.command_stack]),
        session_at=None if session is None else (0 if hit is not None else 1),
    )
    if hit is not None:  # answered at once: no push to ride on
        await _send_ahead(state, call)
    return call


async def _send_ahead(state: GatewayState, call: DirectCall) -> list[Any]:
    """The admission's batch on a round trip of its own, unless it went (or may have gone)
    with the call's push: for a hit, a task (its row needs the session's last tool before
    the call goes) and a call that ended before it was sent (refused arguments)."""
    ahead = call.ahead
    if ahead.tried:
        return ahead.replies or []
    ahead.written()
    try:
        ahead.replies = await state.lines.send(*ahead.commands)
    except RedisError as exc:
        ahead.replies = [exc] * len(ahead.commands)
    _absorb(call)
    return ahead.replies


def _absorb(call: DirectCall) -> None:
    """What the admission's batch answered: the session's last tool (``extras.direct.after``);
    a lost sequence costs one graph edge, a lost count nothing, never the call."""
    replies = call.ahead.replies
    if not replies:
        return
    if call.session_at is not None:
        previous = replies[call.session_at]
        if isinstance(previous, Exception):
            log.warning("direct session of %s: last tool not recorded: %s", call.tool_id, previous)
        elif previous is not None:
            after = previous.decode() if isinstance(previous, bytes) else str(previous)
            call.extras["direct"]["after"] = after
    if isinstance(replies[-1], Exception):
        log.warning("direct call of %s not counted: %s", call.tool_id, replies[-1])


async def run(state: GatewayState, call: DirectCall) -> Row:
    """Run an admitted call to its end and record it; the row as the answer reads it (and as
    the drainer writes it). Cancelled (the client cancelled the call), it is recorded
    `cancelled`, then the cancellation goes on."""
    if call.hit is not None:
        return call.hit
    started = time.monotonic()
    recorder = TraceRecorder(None)
    tok = finish.tokenizer(state.settings, call.end)
    unresolved: set[str] = set()
    value: Any = None
    called = False
    with telemetry.span(
        "execution.run", attributes={EXECUTION_ID: call.execution_id, "agentcards.direct": True}
    ) as span:
        try:
            recorder.tool_start(CALL_ID, call.tool_id, None)
            called = True
            try:
                args, unresolved = await _real_arguments(state, call)
                err, value = await _call_tool(state, call, args, unresolved)
            except Exception as exc:  # a broken backend fails the call, as in the bridge
                log.exception("direct call %s: tool backend failed", call.execution_id)
                err = error_dict(ErrorType.TOOL_ERROR, f"backend failure: {type(exc).__name__}")
            recorder.tool_end(CALL_ID, err)
            outcome = finish.outcome_of(
                call.end, err, value, recorder.events, (time.monotonic() - started) * 1000
            )
        except asyncio.CancelledError:
            if call.task:  # its end is the toolhost's (a cancel: its flag), or the reaper's
                raise
            if called:
                recorder.tool_end(CALL_ID, error_dict(ErrorType.CANCELLED, "cancelled on request"))
            outcome = finish.cancelled_outcome(recorder.events, (time.monotonic() - started) * 1000)
            await asyncio.shield(_finish(state, call, outcome, tok, unresolved, value))
            raise
        if call.task and call.sent:  # recorded by the toolhost before its reply (or, when
            # no toolhost replied, ended by the reaper once the call's lease lapsed)
            row = await read_execution(
                state, execution_id=call.execution_id, tenant_id=call.principal.tenant_id
            )
            if row["status"] not in TERMINAL:
                row = await wait_for_finish(
                    state, execution_id=call.execution_id, timeout_s=call.admission.timeout_s
                )
            # Learning hears of it as of a drained record, after the answer (not waited on;
            # this gateway gone, the resend sweep sends it later).
            asyncio.get_running_loop().run_in_executor(
                None, send_ingests, state.celery, [call.execution_id]
            )
        else:
            row = await _finish(state, call, outcome, tok, unresolved, value)
        span.set_attribute("agentcards.execution.status", str(row["status"]))
        if outcome.error:
            telemetry.fail(span, str(outcome.error.get("type", "error")))
    return row


async def begin_task(state: GatewayState, call: DirectCall) -> None:
    """Make an admitted call a task's (before its task is answered): its running row written
    to Postgres (any replica reads the task, after any restart), its lease set (the toolhost
    renews it while the server works: ``services/toolhost/direct_tasks.py``), its admission's
    counters sent; one thread hop. ``run`` then leaves its end to the toolhost."""
    end = call.end

    def write() -> None:
        with state.pool.connection() as conn:
            write_started(
                conn,
                execution_id=end.execution_id,
                tenant_id=end.tenant_id,
                code=end.code,
                args=end.args,
                tool_id=end.tool_id,
                timeout_s=end.timeout_s,
                extras=end.extras,
                created_at=end.created_at,
                trace_id=end.trace_id,
                user_id=end.user,
                key_id=end.key_id,
                worker=lease_worker(end.execution_id),
            )
        pipe = state.redis.pipeline(transaction=False)
        pipe.set(direct_lease_key(end.execution_id), "gateway", ex=TASK_LEASE_START_S)
        counters = call.admission.counters
        for args, options in counters.command_stack if counters is not None else ():
            pipe.pipeline_execute_command(*args, **options)
        pipe.execute(raise_on_error=False)
        if counters is not None:
            counters.reset()  # sent: not again with an end the gateway records itself

    try:
        await to_thread.run_sync(write)
    except Exception as exc:
        _release(state, call.admission)
        raise DependencyError(f"cannot record the task's call: {type(exc).__name__}") from exc
    call.task = True


def start(state: GatewayState, call: DirectCall) -> asyncio.Task[Row]:
    """``run`` as a task of this gateway, found by its execution id while it runs (a
    2026-07-28 client's retry waits on it: ``state.direct_flights``)."""
    flight = asyncio.create_task(run(state, call))
    state.direct_flights[call.execution_id] = flight
    flight.add_done_callback(lambda _: state.direct_flights.pop(call.execution_id, None))
    return flight


async def _real_arguments(state: GatewayState, call: DirectCall) -> tuple[dict[str, Any], set[str]]:
    """The arguments with the tenant's tokens replaced by their values (a thread hop only
    when they hold tokens), and the tokens that did not resolve."""
    args = call.request.args
    if not tokens_in(args):
        return args, set()
    real, unresolved = await to_thread.run_sync(
        lambda: private.real_values(
            state.pool.connection,
            settings=state.settings,
            tenant_id=call.principal.tenant_id,
            value=args,
        )
    )
    return real, unresolved


async def _call_tool(
    state: GatewayState, call: DirectCall, args: dict[str, Any], unresolved: set[str]
) -> tuple[dict[str, Any] | None, Any]:
    """The tool called over the RPC channel, checked as the sandbox bridge checks a call:
    its error (None: it succeeded) and its value. A task's call carries its end."""
    limits_ = SandboxLimits.from_settings(state.settings, wall_time_s=call.admission.timeout_s)
    refusal = argument_refusal(call.tool_id, call.input_schema, args, limits=limits_)
    if refusal is not None:
        return refusal, None
    end = None
    if call.task:
        end = dataclasses.replace(call.end, unresolved=sorted(unresolved)).to_wire()
        call.sent = True
    deadline = min(
        call.created_at + call.admission.timeout_s, time.time() + limits_.tool_call_timeout_s
    )
    with tool_call_span(call.tool_id, CALL_ID, args) as span:
        ahead = None if call.ahead.tried else call.ahead  # the grant before the push
        reply = await state.rpc.call(
            execution_id=call.execution_id,
            tool=call.tool_id,
            args=args,
            deadline=deadline,
            allowed=[call.tool_id],
            trace_call_id=CALL_ID,
            end=end,
            ahead=ahead,
        )
        if ahead is not None:
            _absorb(call)
        if _approval_of(reply) is not None:
            reply = await _after_approval(state, call, args, reply, limits_, end)
        err, _ = served(ToolResult.of_reply(reply), limits=limits_)
        ended(span, err)
    return err, reply.result if err is None else None


async def _after_approval(
    state: GatewayState,
    call: DirectCall,
    args: dict[str, Any],
    reply: RpcReply,
    limits_: SandboxLimits,
    end: dict[str, Any] | None,
) -> RpcReply:
    """Paused for a person's answer (docs/policy.md): wait for it (no limit counts the wait),
    then send the call again naming its approval; the toolhost runs it once. A wait that
    ends otherwise (its client cancelled it, went away or its session ended) closes the
    approval: nothing will run the call, so nobody should be asked any more."""
    approval_id = ""
    try:
        while (paused := _approval_of(reply)) is not None:
            approval_id, until = str(paused["call_id"]), float(paused["expires_at"]) + 0.5
            await await_answer(
                state.aredis, execution_id=call.execution_id, call_id=approval_id, until=until
            )
            reply = await state.rpc.call(
                execution_id=call.execution_id,
                tool=call.tool_id,
                args=args,
                deadline=time.time() + limits_.tool_call_timeout_s,
                allowed=[call.tool_id],
                trace_call_id=CALL_ID,
                approval=approval_id,
                end=end,
            )
            if _approval_of(reply) is not None:  # the database's clock is behind ours
                await asyncio.sleep(1.0)
    except BaseException as exc:
        if not state.stopping:  # a stopping gateway's calls may go on where their session goes
            why = (
                "the call's client went away or cancelled it while it waited"
                if isinstance(exc, asyncio.CancelledError)
                else f"the call failed while it waited ({type(exc).__name__})"
            )
            await asyncio.shield(
                close_abandoned(state, execution_id=call.execution_id, call_id=approval_id, why=why)
            )
        raise
    return reply


async def _finish(
    state: GatewayState,
    call: DirectCall,
    outcome: ExecutionOutcome,
    tok: Tokenizer | None,
    unresolved: set[str],
    value: Any,
) -> Row:
    """The call's end (``shared.direct.finish``), with its admission's counters and its
    session's record on the same round trip; its events' log kept for its client."""
    await _send_ahead(state, call)  # ended before its push went: its batch goes first
    extra = finish.Extra(
        counters=call.admission.counters,
        forget=None if call.on_record is None else call.on_record.queue_forget,
        send=state.lines.send_queued,
    )
    row = await finish.finish(
        state, call.end, outcome, tok, unresolved, value, extra=extra,
        learn=lambda ids: send_ingests(state.celery, ids),
    )  # fmt: skip
    call.logged = extra.logged
    return row


def _approval_of(reply: RpcReply) -> dict[str, Any] | None:
    """The approval a paused call waits for (None: the reply is the call's outcome)."""
    error = reply.error
    if error is None or error.type != ErrorType.APPROVAL_REQUIRED:
        return None
    return error.approval


def _release(state: GatewayState, admission: DirectAdmission, *, ended: bool = False) -> None:
    """Give the key's rate-limit slot back: the in-flight one of a call that ``ended`` (its
    start still counts in the minute), both of a call that never started."""
    if admission.slot is None:
        return
    try:
        if ended:
            limits.end(state.redis, reservation=admission.slot)
        else:
            limits.release(state.redis, reservation=admission.slot)
    except RedisError as exc:  # the slot lapses by itself after the call's timeout
        log.warning("could not give back a rate-limit slot: %s", exc)
