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

One thread hop in all (the tool found and the call admitted: ``direct.find_and_admit``;
its end takes one more only for the vault rows of tokens it handed out, the invalidation of a
server it may have written, or a result to cache), and Redis round trips: the slot and cache
lookup, one for the grant and the session's last tool, the RPC, one for the record and
announce.
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
from services.gateway.state import GatewayState
from shared import metrics, telemetry
from shared.approvals.wait import await_answer
from shared.auth import limits
from shared.auth.grants import GRANT_RUN_SLACK_S, Grant
from shared.auth.principal import Principal
from shared.cache import runs as cache_runs
from shared.direct.records import finished_row, queue_record, record_of, write_records
from shared.dispatch import send_ingest
from shared.errors import DependencyError, ErrorType, error_dict
from shared.executions.announce import queue_finished
from shared.executions.events import decode_event
from shared.executions.models import ExecutionRequest
from shared.executions.status import ExecutionStatus
from shared.executions.trace import TraceRecorder
from shared.privacy.tokens import Tokenizer, tokens_in
from shared.queues import direct_session_key, events_log_key, grant_key
from shared.rpc import upstream
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

    @property
    def hit(self) -> Row | None:
        """The recorded cache hit that answers it (None: it runs)."""
        return self.admission.hit


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
    perhaps a cache hit), then in one round trip: its grant, its MCP session's last tool
    (``extras.direct.after``), its count, (``relay``: capabilities, lease) the relay of
    its server's requests to its client, withdrawn when the call ends, and (``on_record``)
    the call on its session's record while it runs. ``execution_id``: the execution it goes
    on with (a call paused for approval whose gateway died, ``passthrough.PausedDirect``)."""
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
    try:
        replies = await state.lines.send_queued(pipe)
    except RedisError as exc:
        replies = [exc] * len(pipe)
    if hit is None and isinstance(replies[0], Exception):
        _release(state, admission)
        raise DependencyError(f"cannot grant the call its tool: Redis: {replies[0]}")
    after = None
    if session is not None:
        previous = replies[1 if hit is None else 0]
        if isinstance(previous, Exception):  # a lost sequence costs one graph edge, never the call
            log.warning("direct session %s: last tool not recorded: %s", session_id, previous)
        elif previous is not None:
            after = previous.decode() if isinstance(previous, bytes) else str(previous)
    if isinstance(replies[-1], Exception):  # a lost count never costs the call
        log.warning("direct call of %s not counted: %s", tool_id, replies[-1])
    return DirectCall(
        execution_id=execution_id,
        tool_id=tool_id,
        pii_kinds=pii_kinds,
        input_schema=input_schema,
        principal=principal,
        request=request,
        admission=admission,
        extras={"direct": {"session": session_id, "after": after, "tool": tool_id}},
        trace_id=telemetry.current_trace_id(),
        on_record=on_record if hit is None else None,
    )


async def run(state: GatewayState, call: DirectCall) -> Row:
    """Run an admitted call to its end and record it; the row as the answer reads it (and as
    the drainer writes it). Cancelled (the client cancelled the call), it is recorded
    `cancelled`, then the cancellation goes on."""
    if call.hit is not None:
        return call.hit
    started = time.monotonic()
    recorder = TraceRecorder(None)
    tok = _tokenizer(state, call)
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
                err, value = await _call_tool(state, call, args)
            except Exception as exc:  # a broken backend fails the call, as in the bridge
                log.exception("direct call %s: tool backend failed", call.execution_id)
                err = error_dict(ErrorType.TOOL_ERROR, f"backend failure: {type(exc).__name__}")
            recorder.tool_end(CALL_ID, err)
            outcome = _outcome(call, err, value, recorder, started)
        except asyncio.CancelledError:
            if called:
                recorder.tool_end(CALL_ID, error_dict(ErrorType.CANCELLED, "cancelled on request"))
            outcome = ExecutionOutcome(
                status=ExecutionStatus.CANCELLED,
                error=error_dict(
                    ErrorType.CANCELLED,
                    "cancelled on request; tool calls already made are not undone",
                ),
                trace=recorder.events,
                tool_calls=1,
                duration_ms=(time.monotonic() - started) * 1000,
            )
            await asyncio.shield(_finish(state, call, outcome, tok, unresolved, value))
            raise
        row = await _finish(state, call, outcome, tok, unresolved, value)
        span.set_attribute("agentcards.execution.status", str(row["status"]))
        if outcome.error:
            telemetry.fail(span, str(outcome.error.get("type", "error")))
    return row


def start(state: GatewayState, call: DirectCall) -> asyncio.Task[Row]:
    """``run`` as a task of this gateway, found by its execution id while it runs (a
    2026-07-28 client's retry waits on it: ``state.direct_flights``)."""
    flight = asyncio.create_task(run(state, call))
    state.direct_flights[call.execution_id] = flight
    flight.add_done_callback(lambda _: state.direct_flights.pop(call.execution_id, None))
    return flight


def _tokenizer(state: GatewayState, call: DirectCall) -> Tokenizer | None:
    """The call's tokenizer when its output is tokenised (the stack's and the key's setting)."""
    if not private.tokenizes(state.settings.pii, key_pii_off=call.principal.pii_off):
        return None
    return private.run_tokenizer(state.settings, call.principal.tenant_id)


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
    state: GatewayState, call: DirectCall, args: dict[str, Any]
) -> tuple[dict[str, Any] | None, Any]:
    """The tool called over the RPC channel, checked as the sandbox bridge checks a call:
    its error (None: it succeeded) and its value."""
    limits_ = SandboxLimits.from_settings(state.settings, wall_time_s=call.admission.timeout_s)
    refusal = argument_refusal(call.tool_id, call.input_schema, args, limits=limits_)
    if refusal is not None:
        return refusal, None
    deadline = min(
        call.created_at + call.admission.timeout_s, time.time() + limits_.tool_call_timeout_s
    )
    with tool_call_span(call.tool_id, CALL_ID, args) as span:
        reply = await state.rpc.call(
            execution_id=call.execution_id,
            tool=call.tool_id,
            args=args,
            deadline=deadline,
            allowed=[call.tool_id],
            trace_call_id=CALL_ID,
        )
        while (paused := _approval_of(reply)) is not None:
            # Paused for a person's answer (docs/policy.md): wait for it (no limit counts the
            # wait), then send the call again naming its approval; the toolhost runs it once.
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
            )
            if _approval_of(reply) is not None:  # the database's clock is behind ours
                await asyncio.sleep(1.0)
        err, _ = served(ToolResult.of_reply(reply), limits=limits_)
        ended(span, err)
    return err, reply.result if err is None else None


def _approval_of(reply: RpcReply) -> dict[str, Any] | None:
    """The approval a paused call waits for (None: the reply is the call's outcome)."""
    error = reply.error
    if error is None or error.type != ErrorType.APPROVAL_REQUIRED:
        return None
    return error.approval


def _outcome(
    call: DirectCall,
    err: dict[str, Any] | None,
    value: Any,
    recorder: TraceRecorder,
    started: float,
) -> ExecutionOutcome:
    """What the one line of code would have ended with: the tool's value, or its failure
    (as the sandbox's child reports an uncaught ``ToolCallError``)."""
    duration_ms = (time.monotonic() - started) * 1000
    if err is None:
        return ExecutionOutcome(
            status=ExecutionStatus.SUCCEEDED,
            result=value,
            trace=recorder.events,
            tool_calls=1,
            duration_ms=duration_ms,
        )
    message = f"{call.tool_id}: {err.get('message', 'tool call failed')}"[:4000]
    # ``authorization_required``: the connect link, structured (as agent code's ``e.url``).
    url = err.get("url") if err.get("type") == ErrorType.AUTHORIZATION_REQUIRED else None
    details = {"url": url} if isinstance(url, str) else None
    return ExecutionOutcome(
        status=ExecutionStatus.FAILED,
        error=error_dict(str(err.get("type") or ErrorType.TOOL_ERROR), message, details=details),
        trace=recorder.events,
        tool_calls=1,
        duration_ms=duration_ms,
    )


async def _finish(
    state: GatewayState,
    call: DirectCall,
    outcome: ExecutionOutcome,
    tok: Tokenizer | None,
    unresolved: set[str],
    value: Any,
) -> Row:
    """Tokenise the outcome (on the event loop when it is small), keep its tokens' values and
    invalidate what it may have written (a thread hop, only when there is either), then
    record and announce it on one round trip, and cache its result where the rules allow."""
    kinds_by_tool = {call.tool_id: call.pii_kinds}
    pii = None
    if tok is not None:

        def tokenise() -> ExecutionOutcome:
            kinds = private.tool_kinds(kinds_by_tool, call.tool_id)
            # The result is the tool's own to its client: an embedded Apps page a host would
            # render is withheld rather than tokenised into a broken page.
            shown = private.without_unsafe_app_pages(tok, outcome.result, kinds)
            if outcome.status == ExecutionStatus.SUCCEEDED and kinds:
                tok.value(shown, tool=call.tool_id, kinds=kinds)  # which tool the values came from
            shown_outcome = dataclasses.replace(outcome, result=shown)
            return private.tokenized_outcome(tok, shown_outcome, kinds_by_tool)

        if private.small(value) and private.small(outcome.trace):
            outcome = tokenise()
        else:
            outcome = await to_thread.run_sync(tokenise)
        pii = private.token_record(tok, unresolved)
    cache = call.admission.cache
    assert cache is not None  # a call that runs read it at admission
    written = cache_runs.servers_written(
        cache_runs.Finished.of(outcome, str(outcome.status)), cache=cache
    )
    ended = _Ended(outcome, pii, str(outcome.status), outcome.error)
    if (tok is not None and tok.produced) or written:
        ended = await to_thread.run_sync(lambda: _settle(state, call, ended, tok, written))
    row = finished_row(
        execution_id=call.execution_id,
        tenant_id=call.principal.tenant_id,
        code=call.request.code,
        args=call.request.args,
        tool_id=call.tool_id,
        timeout_s=call.admission.timeout_s,
        extras=call.extras,
        created_at=call.created_at,
        finished_at=time.time(),
        status=ended.status,
        result=ended.outcome.result if ended.status == ExecutionStatus.SUCCEEDED else None,
        error=ended.error,
        trace=ended.outcome.trace,
        duration_ms=ended.outcome.duration_ms,
        trace_id=call.trace_id,
        pii=ended.pii,
        user_id=call.principal.user,
    )
    await _store(state, call, row, ended.outcome)
    if ended.status == ended.outcome.status:
        await _remember(state, call, row, cache_runs.Finished.of(ended.outcome, ended.status))
    return row


@dataclass(frozen=True, slots=True)
class _Ended:
    """How a call ended, as recorded: its (tokenised) outcome, its tokens' record, and the
    status and error it is stored with (failed when its tokens or invalidation failed)."""

    outcome: ExecutionOutcome
    pii: dict[str, Any] | None
    status: str
    error: dict[str, Any] | None


def _settle(
    state: GatewayState,
    call: DirectCall,
    ended: _Ended,
    tok: Tokenizer | None,
    written: list[str],
) -> _Ended:
    """Blocking: the tokens' vault rows, then the cache invalidation of the servers the call
    may have ``written``; either failing, the call ends failed."""
    outcome, pii = ended.outcome, ended.pii
    if tok is not None and tok.produced:  # a token handed out always resolves
        try:
            with state.pool.connection() as conn:
                private.store_token_record(
                    conn, settings=state.settings, tenant_id=call.principal.tenant_id, tok=tok
                )
        except Exception as exc:  # no token without its value kept: nothing leaves, failed
            log.exception("direct call %s: tokens not stored", call.execution_id)
            outcome = dataclasses.replace(
                outcome,
                status=ExecutionStatus.FAILED,
                result=None,
                error=error_dict(
                    ErrorType.INTERNAL_ERROR,
                    f"the call's tokens could not be stored ({type(exc).__name__}); "
                    "tool calls it made are not undone",
                ),
            )
            pii = None
    status, error = str(outcome.status), outcome.error
    try:
        cache_runs.invalidate_servers_safely(state.pool.connection, state.redis, servers=written)
    except Exception as exc:  # its writes may be read back stale: it ends failed
        log.exception("direct call %s: writes not invalidated", call.execution_id)
        status = str(ExecutionStatus.FAILED)
        error = error_dict(
            ErrorType.INTERNAL_ERROR,
            f"the call's writes could not be invalidated in the result cache ({exc}); "
            "tool calls it made are not undone",
        )
    return _Ended(outcome, pii, status, error)


async def _store(
    state: GatewayState, call: DirectCall, row: Row, outcome: ExecutionOutcome
) -> None:
    """The record appended to the stream, with the admission's counters, the end's announce,
    the grant's removal and the rate-limit slot given back, on one round trip from the event
    loop; if Redis refuses the record, it is written to Postgres now."""
    pipe = state.aredis.pipeline(transaction=False)
    if call.admission.counters is not None:  # queued at admission, sent now (no I/O was done)
        for args, options in call.admission.counters.command_stack:
            pipe.pipeline_execute_command(*args, **options)
    first = len(pipe)  # after the admission's counters
    queue_record(pipe, row, key_id=call.principal.key_id)
    queue_finished(
        pipe,
        row=row,
        status=str(row["status"]),
        error=row["error"],
        duration_ms=outcome.duration_ms,
        stored_row=row,
    )
    logged = len(pipe)  # read after its end is logged: what its client is yet to hear
    pipe.lrange(events_log_key(call.execution_id), 0, -1)
    pipe.delete(grant_key(call.execution_id))  # the call is over: so is its scope
    upstream.queue_withdraw(pipe, execution_id=call.execution_id)  # and its relay
    if call.admission.slot is not None:  # else the slot lapses after the call's timeout
        limits.end(pipe, reservation=call.admission.slot)
    # Ended: off its session's record (one cancelled stays there unless its client cancelled
    # it, which ``calls.remembered`` sees: a replica stopping mid-call cancels it too).
    if call.on_record is not None and row["status"] != ExecutionStatus.CANCELLED:
        call.on_record.queue_forget(pipe)
    try:
        replies = await state.lines.send_queued(pipe)
    except RedisError as exc:
        replies = [exc] * len(pipe)
    if not isinstance(replies[logged], Exception):
        call.logged = [decode_event(item) for item in replies[logged]]
    replies = [reply for i, reply in enumerate(replies) if i >= first and i != logged]
    if isinstance(replies[0], Exception):
        log.warning(
            "direct call %s: record written at once (Redis: %s)", call.execution_id, replies[0]
        )
        record = record_of(row, key_id=call.principal.key_id)

        def write() -> None:
            with state.pool.connection() as conn:
                written = write_records(conn, [record])
            for execution_id in written:
                send_ingest(state.celery, execution_id)

        await to_thread.run_sync(write)
    elif any(isinstance(reply, Exception) for reply in replies[1:]):
        log.warning("direct call %s: end not announced: %s", call.execution_id, replies[1:])


async def _remember(
    state: GatewayState, call: DirectCall, row: Row, finished: cache_runs.Finished
) -> None:
    """Cache the result where the rules allow (best-effort: the call is recorded already; a
    thread hop only when there is something to cache). Values in clear (a key that opted out
    of PII, on a stack that tokenises) are never served to the tenant's other keys."""
    if state.settings.pii != "off" and call.principal.pii_off:
        return
    cache = call.admission.cache
    assert cache is not None
    if not cache_runs.remembers(row=row, run=finished, cache=cache, settings=state.settings):
        return

    def remember() -> None:
        with state.pool.connection() as conn:
            cache_runs.remember(
                conn, state.redis, row=row, run=finished, cache=cache, settings=state.settings
            )

    try:
        await to_thread.run_sync(remember)
    except Exception:
        log.exception("direct call %s: result not cached", call.execution_id)


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
