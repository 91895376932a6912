"""A direct call's end: its outcome tokenised, its writes invalidated, recorded, announced, cached.

One definition for both places a direct call ends (docs/mcp.md, "A direct call is an
execution"): the gateway that ran it (``services/gateway/ops/direct_call.py``), and, for a
call made as an MCP task, the toolhost that called its server (``services/toolhost/
direct_tasks.py``), so the end is recorded even when the gateway that started it died.
``CallEnd`` is what an end needs of its call; it crosses the RPC channel as JSON.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import redis
import redis.asyncio as aioredis
from anyio import to_thread
from redis.exceptions import RedisError

from shared.auth import limits
from shared.cache import runs as cache_runs
from shared.cache.policy import ToolPolicy
from shared.config import Settings
from shared.direct.records import finished_row, queue_record, record_of, write_records
from shared.errors import ErrorType, error_dict
from shared.executions.announce import queue_finished
from shared.executions.events import decode_event
from shared.executions.status import ExecutionStatus
from shared.privacy.tokens import Tokenizer
from shared.queues import events_log_key, grant_key
from shared.rpc import upstream
from shared.sandbox import privacy as private
from shared.sandbox.outcome import ExecutionOutcome

log = logging.getLogger(__name__)

Row = dict[str, Any]
# Who is told a record written at once (not by a drainer) exists: learning's ingestion.
Learn = Callable[[list[str]], object]


class Backends(Protocol):
    """The stores an end writes to (the gateway's state, or the toolhost's)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def redis(self) -> redis.Redis: ...

    @property
    def aredis(self) -> aioredis.Redis: ...

    @property
    def pool(self) -> Any: ...  # a psycopg pool: ``pool.connection()``


@dataclass
class CallEnd:
    """What a direct call's end needs of its call (``to_wire``/``of_wire``: as JSON)."""

    execution_id: str
    tool_id: str
    pii_kinds: frozenset[str] | None  # its server's "pii" setting (None: every kind)
    tenant_id: str
    key_id: str | None
    user: str | None
    pii_off: bool  # the key opted out of tokenisation
    code: str
    args: dict[str, Any]
    timeout_s: float
    extras: dict[str, Any]
    created_at: float
    trace_id: str | None
    cache: cache_runs.RunCache
    slot: limits.Reservation | None
    unresolved: list[str] = dataclasses.field(default_factory=list)  # tokens without a value

    def to_wire(self) -> dict[str, Any]:
        """As JSON (the RPC request of a task's call carries it to the toolhost)."""
        body = dataclasses.asdict(self)
        body["pii_kinds"] = None if self.pii_kinds is None else sorted(self.pii_kinds)
        return body

    @classmethod
    def of_wire(cls, body: dict[str, Any]) -> CallEnd:
        """``to_wire``'s inverse; ValueError (KeyError, TypeError) when malformed."""
        cache, slot = body["cache"], body.get("slot")
        scope = cache["scope"]
        return cls(
            **{
                **body,
                "pii_kinds": None if body["pii_kinds"] is None else frozenset(body["pii_kinds"]),
                "cache": cache_runs.RunCache(
                    scope=cache_runs.Scope(
                        policies={k: ToolPolicy(**v) for k, v in scope["policies"].items()},
                        digest=scope["digest"],
                    ),
                    generations={k: int(v) for k, v in cache["generations"].items()},
                    capability_config=cache.get("capability_config"),
                ),
                "slot": None if slot is None else limits.Reservation(**slot),
            }
        )


def tokenizer(settings: Settings, end: CallEnd) -> Tokenizer | None:
    """The call's tokenizer when its output is tokenised (the stack's and the key's setting)."""
    if not private.tokenizes(settings.pii, key_pii_off=end.pii_off):
        return None
    return private.run_tokenizer(settings, end.tenant_id)


def cancelled_outcome(trace: list[dict[str, Any]], duration_ms: float) -> ExecutionOutcome:
    """A direct call cancelled on request (its client's cancel, ``tasks/cancel``), as recorded."""
    return ExecutionOutcome(
        status=ExecutionStatus.CANCELLED,
        error=error_dict(
            ErrorType.CANCELLED, "cancelled on request; tool calls already made are not undone"
        ),
        trace=trace,
        tool_calls=1,
        duration_ms=duration_ms,
    )


def outcome_of(
    end: CallEnd,
    err: dict[str, Any] | None,
    value: Any,
    trace: list[dict[str, Any]],
    duration_ms: float,
) -> ExecutionOutcome:
    """What the one line of code would have ended with: the tool's value, or its failure
    (as the sandbox's child reports an uncaught ``ToolCallError``)."""
    if err is None:
        return ExecutionOutcome(
            status=ExecutionStatus.SUCCEEDED,
            result=value,
            trace=trace,
            tool_calls=1,
            duration_ms=duration_ms,
        )
    message = f"{end.tool_id}: {err.get('message', 'tool call failed')}"[:4000]
    # ``authorization_required``: the connect link, structured (as agent code's ``e.url``).
    url = err.get("url") if err.get("type") == ErrorType.AUTHORIZATION_REQUIRED else None
    details = {"url": url} if isinstance(url, str) else None
    return ExecutionOutcome(
        status=ExecutionStatus.FAILED,
        error=error_dict(str(err.get("type") or ErrorType.TOOL_ERROR), message, details=details),
        trace=trace,
        tool_calls=1,
        duration_ms=duration_ms,
    )


@dataclass
class Extra:
    """What the gateway's end adds to the record's round trip: the admission's counters, the
    events' log read for its client, the call taken off its session's record; how the round
    trip is sent (the gateway's ``Lines.send_queued``, half the CPU of ``execute``)."""

    counters: Any = None  # a redis pipeline queued at admission
    forget: Callable[[Any], None] | None = None
    logged: list[dict[str, Any]] | None = None
    send: Callable[[Any], Awaitable[list[Any]]] | None = None


async def finish(
    b: Backends,
    end: CallEnd,
    outcome: ExecutionOutcome,
    tok: Tokenizer | None,
    unresolved: set[str],
    value: Any,
    *,
    extra: Extra | None = None,
    durable: bool = False,
    learn: Learn | None = None,
) -> Row:
    """Tokenise the outcome (on the event loop when it is small), keep its tokens' values and
    invalidate what it may have written (a thread hop, only when there is either), then
    record and announce it on one round trip (``durable``: written to Postgres first, for a
    task whose row exists already), and cache its result where the rules allow."""
    kinds_by_tool = {end.tool_id: end.pii_kinds}
    pii = None
    if tok is not None:

        def tokenise() -> ExecutionOutcome:
            kinds = private.tool_kinds(kinds_by_tool, end.tool_id)
            # The result is the tool's own to its client: an embedded Apps page a host would
            # render is withheld rather than tokenised into a broken page.
            shown = private.without_unsafe_app_pages(tok, outcome.result, kinds)
            if outcome.status == ExecutionStatus.SUCCEEDED and kinds:
                tok.value(shown, tool=end.tool_id, kinds=kinds)  # which tool the values came from
            shown_outcome = dataclasses.replace(outcome, result=shown)
            return private.tokenized_outcome(tok, shown_outcome, kinds_by_tool)

        if private.small(value) and private.small(outcome.trace):
            outcome = tokenise()
        else:
            outcome = await to_thread.run_sync(tokenise)
        pii = private.token_record(tok, unresolved)
    written = cache_runs.servers_written(
        cache_runs.Finished.of(outcome, str(outcome.status)), cache=end.cache
    )
    ended = _Ended(outcome, pii, str(outcome.status), outcome.error)
    if (tok is not None and tok.produced) or written:
        ended = await to_thread.run_sync(lambda: _settle(b, end, ended, tok, written))
    row = finished_row(
        execution_id=end.execution_id,
        tenant_id=end.tenant_id,
        code=end.code,
        args=end.args,
        tool_id=end.tool_id,
        timeout_s=end.timeout_s,
        extras=end.extras,
        created_at=end.created_at,
        finished_at=time.time(),
        status=ended.status,
        result=ended.outcome.result if ended.status == ExecutionStatus.SUCCEEDED else None,
        error=ended.error,
        trace=ended.outcome.trace,
        duration_ms=ended.outcome.duration_ms,
        trace_id=end.trace_id,
        pii=ended.pii,
        user_id=end.user,
    )
    if durable:  # its running row is in Postgres: the end goes there before it is announced
        record = record_of(row, key_id=end.key_id)
        await to_thread.run_sync(lambda: _write_now(b, [record]))
    await _store(b, end, row, ended.outcome, extra or Extra(), recorded=durable, learn=learn)
    if ended.status == ended.outcome.status:
        await _remember(b, end, row, cache_runs.Finished.of(ended.outcome, ended.status))
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
    b: Backends, end: CallEnd, ended: _Ended, tok: Tokenizer | None, written: list[str]
) -> _Ended:
    """Blocking: the tokens' vault rows, then the cache invalidation of the servers the call
    may have ``written``; either failing, the call ends failed."""
    outcome, pii = ended.outcome, ended.pii
    if tok is not None and tok.produced:  # a token handed out always resolves
        try:
            with b.pool.connection() as conn:
                private.store_token_record(
                    conn, settings=b.settings, tenant_id=end.tenant_id, tok=tok
                )
        except Exception as exc:  # no token without its value kept: nothing leaves, failed
            log.exception("direct call %s: tokens not stored", end.execution_id)
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
        cache_runs.invalidate_servers_safely(b.pool.connection, b.redis, servers=written)
    except Exception as exc:  # its writes may be read back stale: it ends failed
        log.exception("direct call %s: writes not invalidated", end.execution_id)
        status = str(ExecutionStatus.FAILED)
        error = error_dict(
            ErrorType.INTERNAL_ERROR,
            f"the call's writes could not be invalidated in the result cache ({exc}); "
            "tool calls it made are not undone",
        )
    return _Ended(outcome, pii, status, error)


def _write_now(b: Backends, records: list[Row]) -> list[str]:
    """Blocking: the records written to Postgres now; the ids written."""
    with b.pool.connection() as conn:
        return write_records(conn, records)


async def _store(
    b: Backends, end: CallEnd, row: Row, outcome: ExecutionOutcome, extra: Extra, *,
    recorded: bool, learn: Learn | None,
) -> None:  # fmt: skip
    """The record appended to the stream (unless ``recorded`` in Postgres already), with the
    admission's counters, the end's announce, the grant's removal and the rate-limit slot
    given back, on one round trip from the event loop; if Redis refuses the record, it is
    written to Postgres now."""
    pipe = b.aredis.pipeline(transaction=False)
    if extra.counters is not None:  # queued at admission, sent now (no I/O was done)
        for args, options in extra.counters.command_stack:
            pipe.pipeline_execute_command(*args, **options)
    first = len(pipe)  # after the admission's counters
    if not recorded:
        queue_record(pipe, row, key_id=end.key_id)
    queue_finished(
        pipe,
        row=row,
        status=str(row["status"]),
        error=row["error"],
        duration_ms=outcome.duration_ms,
        stored_row=row,
    )
    logged = len(pipe)  # read after its end is logged: what its client is yet to hear
    pipe.lrange(events_log_key(end.execution_id), 0, -1)
    pipe.delete(grant_key(end.execution_id))  # the call is over: so is its scope
    upstream.queue_withdraw(pipe, execution_id=end.execution_id)  # and its relay
    if end.slot is not None:  # else the slot lapses after the call's timeout
        limits.end(pipe, reservation=end.slot)
    if extra.forget is not None and row["status"] != ExecutionStatus.CANCELLED:
        extra.forget(pipe)
    queued = len(pipe)  # an executed pipeline is empty, however it ended
    try:
        if extra.send is not None:
            replies = await extra.send(pipe)
        else:
            replies = await pipe.execute(raise_on_error=False)
    except RedisError as exc:
        replies = [exc] * queued
    if not isinstance(replies[logged], Exception):
        extra.logged = [decode_event(item) for item in replies[logged]]
    replies = [reply for i, reply in enumerate(replies) if i >= first and i != logged]
    if not recorded and isinstance(replies[0], Exception):
        log.warning(
            "direct call %s: record written at once (Redis: %s)", end.execution_id, replies[0]
        )
        record = record_of(row, key_id=end.key_id)
        written = await to_thread.run_sync(lambda: _write_now(b, [record]))
        if written and learn is not None:
            await to_thread.run_sync(lambda: learn(written))
    elif any(isinstance(reply, Exception) for reply in replies[0 if recorded else 1 :]):
        log.warning("direct call %s: end not announced: %s", end.execution_id, replies)


async def _remember(b: Backends, end: CallEnd, row: Row, finished: cache_runs.Finished) -> None:
    """Cache the result where the rules allow (best-effort: the call is recorded already; a
    thread hop only when there is something to cache). Values in clear (a key that opted out
    of PII, on a stack that tokenises) are never served to the tenant's other keys."""
    settings = b.settings
    if settings.pii != "off" and end.pii_off:
        return
    if not cache_runs.remembers(row=row, run=finished, cache=end.cache, settings=settings):
        return

    def remember() -> None:
        with b.pool.connection() as conn:
            cache_runs.remember(
                conn, b.redis, row=row, run=finished, cache=end.cache, settings=settings
            )

    try:
        await to_thread.run_sync(remember)
    except Exception:
        log.exception("direct call %s: result not cached", end.execution_id)
