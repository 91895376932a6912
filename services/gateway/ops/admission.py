"""Admitting a submission: check it against limits and known tools, take a rate-limit slot,
then answer it from the result cache or record it queued."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import redis
from anyio import to_thread

from services.gateway.ops.policy import cache_clearance, refuse_by_policy
from services.gateway.ops.result_cache import Generations, answer_from_cache, lookup_digest
from services.gateway.state import GatewayState
from shared import metrics, tool_ids
from shared.auth import limits
from shared.auth.audit import SUBMIT_AUDIT_SQL, AuditAction, submit_audit_params
from shared.auth.patterns import allowed_scope
from shared.auth.principal import Principal
from shared.cache import entries
from shared.cache import runs as cache_runs
from shared.cache.runs import RunCache, Scope
from shared.cache.stats import Level, record_lookup
from shared.db import DictConnection
from shared.errors import (
    DependencyError,
    ToolNotAllowed,
    ValidationFailed,
)
from shared.events import bus
from shared.executions.models import ExecutionRequest
from shared.executions.store import (
    create_execution,
    finished_executions,
)
from shared.inputs import check_value
from shared.policy.facts import Surface
from shared.sandbox.child.usercode import find_syntax_error
from shared.sandbox.typescript_syntax import find_typescript_syntax_error
from shared.telemetry import span, traced
from shared.tools.store import awaiting_servers_at, get_tools, tools_version

Row = dict[str, Any]
log = logging.getLogger(__name__)

# Code up to this size is parsed here, so a syntax error fails at once without a sandbox.
# Parsing holds the GIL (~2 ms per KiB): 32 KiB bounds the stall at ~60 ms, and covers
# agent code in practice; longer code gets the same syntax_error from the sandbox.
SYNTAX_PRECHECK_BYTES = 32 << 10


def validate_request(state: GatewayState, request: ExecutionRequest) -> float:
    """Check size and limits before anything is written; returns the effective timeout."""
    settings = state.settings
    size = len(request.code.encode())
    if size > settings.sandbox_code_bytes:
        raise ValidationFailed(
            f"code is {size} bytes; the limit is {settings.sandbox_code_bytes}",
            field="code",
            limit=settings.sandbox_code_bytes,
        )
    # The same check the sandbox makes before starting the child (depth, size, JSON-ness).
    check_value(request.args, field="args", max_bytes=settings.sandbox_tool_args_bytes)
    timeout_s = request.timeout_s or settings.sandbox_wall_time_s
    if timeout_s > settings.sandbox_max_wall_time_s:
        raise ValidationFailed(
            f"timeout_s {timeout_s} exceeds the maximum {settings.sandbox_max_wall_time_s}",
            field="timeout_s",
        )
    return timeout_s


def unknown_tools(state: GatewayState, tools: list[str]) -> list[str]:
    """Tool ids in the requested scope that the toolhost has never seen (those of a server
    whose tools are unknown until a person connects it excepted: the call will say how)."""
    if not tools:
        return []
    with state.pool.connection() as conn:
        known = get_tools(conn, ids=tools)
        missing = [t for t in tools if t not in known]
        if missing:
            awaiting = awaiting_servers_at(conn, version=tools_version(conn))
            missing = [t for t in missing if not _on_server(t, awaiting)]
    return missing


def _on_server(tool: str, servers: frozenset[str]) -> bool:
    return tool_ids.is_tool_id(tool) and tool_ids.parse(tool).server in servers


def reserve_slot(
    state: GatewayState, *, principal: Principal, timeout_s: float
) -> limits.Reservation | None:
    """The key's executions/min and concurrency checked (RateLimited past either), a slot taken."""
    if not limits.limited(principal):
        return None

    def finished(ids: Sequence[str]) -> list[str]:
        with state.pool.connection() as conn:
            return finished_executions(conn, ids=ids, tenant_id=principal.tenant_id)

    try:
        return limits.reserve(
            state.redis, principal=principal, timeout_s=timeout_s, finished=finished
        )
    except redis.RedisError as exc:
        raise DependencyError(f"cannot check the key's rate limits: Redis: {exc}") from exc


def scoped_request(request: ExecutionRequest, principal: Principal) -> ExecutionRequest:
    """The request with its `tools` narrowed to the caller's allow-list; ToolNotAllowed when none is left.

    A request without `tools` keeps None: its scope is every tool the patterns allow, checked
    again by the worker and the toolhost against the grant record.
    """
    kept, refused = allowed_scope(request.tools, principal.tool_patterns)
    if refused and not kept:
        raise ToolNotAllowed(
            f"tools not allowed for this API key: {', '.join(refused[:20])}; "
            f"it may call {', '.join(principal.tool_patterns or ())}",
            tools=refused,
        )
    return request if not refused else request.model_copy(update={"tools": kept})


@dataclass(frozen=True, slots=True)
class Admission:
    """A submission past its checks: the cache hit or the new (or idempotently found) row."""

    row: Row
    created: bool
    hit: bool
    request: ExecutionRequest
    syntax: dict[str, Any] | None  # the code does not parse: fail it without a sandbox


@traced("admission")
def admit(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    principal: Principal,
    capability_id: str | None = None,
    conn: Any = None,
    extras: dict[str, Any] | None = None,
    counters: redis.client.Pipeline | None = None,
) -> Admission:
    """Check, take a rate-limit slot, then answer from the result cache (a recorded, audited,
    succeeded row) or record a queued execution and its audit row; blocking, so a hit costs
    one thread hop in all (on ``conn`` when given). Its counters and events are sent together,
    in one round trip at the end; ``counters``: queued on the caller's pipeline instead, which
    the caller sends once it admitted without error (with the run's grant: ``send_admitted``)."""
    timeout_s = validate_request(state, request)
    missing = unknown_tools(state, request.tools or [])
    if missing:
        raise ValidationFailed(
            f"unknown tools in scope: {', '.join(missing)}: find tool ids with search_tools "
            "(MCP) or GET /v1/tools",
            tools=missing,
        )
    request = scoped_request(request, principal)
    if capability_id is None:  # a capability's run was decided by its name (capabilities.py)
        refuse_by_policy(state, principal=principal, language=request.language, args=request.args)
    slot = reserve_slot(state, principal=principal, timeout_s=timeout_s)
    syntax = None
    deferred = counters is not None
    counters = counters if counters is not None else state.redis.pipeline(transaction=False)
    if capability_id is not None:
        metrics.incr(counters, "capabilities_executed_total")
    try:
        # Pipelined: BEGIN goes out with the transaction's first statement, COMMIT with its
        # last. A new run costs three round trips (five before): BEGIN and the cache's read;
        # the row and its audit row (one statement) and COMMIT; the pipeline's closing Sync.
        with (
            nullcontext(conn) if conn is not None else state.pool.connection() as conn,
            conn.pipeline(),
        ):
            hit = _from_cache(state, conn, request=request, principal=principal,
                              timeout_s=timeout_s, capability_id=capability_id,
                              counters=counters)  # fmt: skip
            if hit is not None:  # a hit is a (finished) execution: it holds the slot like one
                row, created = hit, True
                conn.commit()
            else:
                if len(request.code) <= SYNTAX_PRECHECK_BYTES:
                    syntax = _syntax_error(request.language, request.code)
                # With its audit row, in the same statement: no execution without one.
                row, created = create_execution(
                    conn, request=request, timeout_s=timeout_s, tenant_id=principal.tenant_id,
                    capability_id=capability_id, extras=extras, user_id=principal.user,
                    audit=_submission_audit(principal, request, capability_id=capability_id),
                    commit=True,
                )  # fmt: skip
    except BaseException:
        if slot is not None:
            limits.release(state.redis, reservation=slot)
        send_counters(counters)
        raise
    if slot is not None:
        _settle(state, slot=slot, execution_id=str(row["id"]) if created else None)
    if hit is not None:
        bus.queue(
            counters,
            tenant_id=principal.tenant_id,
            type=bus.EventType.EXECUTION_FINISHED,
            data=bus.execution_finished(row),
        )
    if not deferred:
        send_counters(counters)
    return Admission(row=row, created=created, hit=hit is not None, request=request, syntax=syntax)


def _from_cache(
    state: GatewayState,
    conn: Any,
    *,
    request: ExecutionRequest,
    principal: Principal,
    timeout_s: float,
    capability_id: str | None,
    counters: redis.client.Pipeline,
    scope: Scope | None = None,
    direct: bool = False,
    generations: Generations | None = None,
) -> Row | None:
    """The recorded hit that answers this submission (``answer_from_cache``), or None: a miss,
    a request that asked for no cache, a key that opted out of PII on a stack that tokenises
    (it wants values, and the cache holds tokens), or, on a stack whose policy file decides
    each tool call, an entry with a call the policy would refuse or pause now for this caller
    (``cache_clearance``, docs/policy.md). ``direct``: a direct call's lookup."""
    if not _looks_up(state, request, principal):
        return None
    cleared = None
    if state.policy.configured:
        surface = Surface.CODE if capability_id is None else Surface.CAPABILITY
        cleared = cache_clearance(state, conn, principal=principal,
                                  surface=Surface.DIRECT if direct else surface,
                                  language=request.language)  # fmt: skip
    return answer_from_cache(state, conn, request=request, principal=principal,
                             timeout_s=timeout_s, capability_id=capability_id,
                             counters=counters, scope=scope, cleared=cleared,
                             generations=generations)  # fmt: skip


def _looks_up(state: GatewayState, request: ExecutionRequest, principal: Principal) -> bool:
    """Whether a submission is looked up in the result cache at all: not when it asked for
    no cache, nor for a key that opted out of PII on a stack that tokenises (it wants
    values, and the cache holds tokens)."""
    tokens_cached = state.settings.pii != "off"
    return not (request.no_cache or (principal.pii_off and tokens_cached))


@dataclass(frozen=True, slots=True)
class DirectAdmission:
    """A direct call past its checks: its cache hit (a recorded row) or what its run needs."""

    timeout_s: float
    slot: limits.Reservation | None
    hit: Row | None
    cache: RunCache | None  # a call that runs: its scope's policies and generations before it
    # a call that runs: its cache lookup's counters, sent with its record (one round trip)
    counters: redis.client.Pipeline | None = None


@traced("admission")
def admit_direct(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    principal: Principal,
    conn: DictConnection,
    known: Sequence[Mapping[str, Any]],
) -> DirectAdmission:
    """``admit`` for a direct call (its one tool known and allowed: ``direct.find_and_admit``,
    on ``conn`` with the tools' rows ``known`` it read): checked, a rate-limit slot taken,
    then answered from the result cache (a recorded, audited, succeeded row, as ``admit``
    records it) or not; a call that runs writes nothing here: it records itself when it ends
    (``ops/direct_call.py``), and sends the lookup's counters then. Blocking."""
    timeout_s = validate_request(state, request)
    slot = reserve_slot(state, principal=principal, timeout_s=timeout_s)
    counters = state.redis.pipeline(transaction=False)
    read = Generations()  # the servers' generations, read with the entry: one round trip
    try:
        scope = cache_runs.scope_among(known, tools=request.tools)
        if cache_runs.may_store(scope, settings=state.settings):
            hit = _from_cache(state, conn, request=request, principal=principal,
                              timeout_s=timeout_s, capability_id=None, counters=counters,
                              scope=scope, direct=True, generations=read)  # fmt: skip
        else:  # nothing it may leave in the cache: no lookup, no generations
            hit, read.read = None, {}
        conn.commit()  # a hit's rows, before anyone hears of it
        cache = (
            None
            if hit
            else cache_runs.prepare(state.redis, scope=scope, config=None, generations=read.read)
        )
    except BaseException:
        if slot is not None:
            limits.release(state.redis, reservation=slot)
        send_counters(counters)
        raise
    if hit is None:
        return DirectAdmission(timeout_s=timeout_s, slot=slot, hit=None, cache=cache,
                               counters=counters)  # fmt: skip
    if slot is not None:  # a hit is a (finished) execution: it holds the slot like one
        _settle(state, slot=slot, execution_id=str(hit["id"]))
    bus.queue(
        counters,
        tenant_id=principal.tenant_id,
        type=bus.EventType.EXECUTION_FINISHED,
        data=bus.execution_finished(hit),
    )
    send_counters(counters)
    return DirectAdmission(timeout_s=timeout_s, slot=None, hit=hit, cache=cache)


async def admit_direct_on_loop(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    principal: Principal,
    known: Sequence[Mapping[str, Any]],
) -> DirectAdmission | None:
    """``admit_direct`` on the event loop, for a call in which nothing needs a thread: no
    policy deciding cached calls, a key whose concurrency set is not full (Postgres says
    which of its members ended), no entry cached for it (a hit is recorded in Postgres).
    Its rate-limit slot, lookup and servers' generations on one round trip, sent raw
    (``Lines``). None (nothing kept, nothing counted): ``admit_direct`` decides it, from
    the start."""
    if state.policy.configured:
        return None
    with span("admission"):
        timeout_s = validate_request(state, request)
        scope = cache_runs.scope_among(known, tools=request.tools)
        stored = cache_runs.may_store(scope, settings=state.settings)
        looks = stored and _looks_up(state, request, principal)
        pipe = state.redis.pipeline(transaction=False)  # gathers the commands only
        member = str(uuid.uuid4()) if limits.limited(principal) else None
        if member is not None:
            pipe.execute_command(*limits.reserve_command(principal, timeout_s, member))
        servers = cache_runs.scope_servers(scope) if stored else []
        if looks:
            keys = entries.queue_entry_and_generations(
                pipe, tenant_id=principal.tenant_id, digest=lookup_digest(request, scope),
                servers=servers,
            )  # fmt: skip
        else:
            keys = entries.queue_generations(pipe, servers)
        try:
            # Nothing to ask (no rate limit, nothing it may leave in the cache): no round trip.
            replies = await state.lines.send_queued(pipe) if pipe.command_stack else []
        except redis.RedisError as exc:
            if member is not None:  # its slot may be taken: not a second one
                raise DependencyError(f"cannot check the key's rate limits: Redis: {exc}") from exc
            return None  # ``admit_direct`` meets it too, and says so
        slot = None
        if member is not None:
            taken, replies = replies[0], replies[1:]
            if isinstance(taken, Exception):
                return None
            outcome = limits.reserved(principal, member, taken)  # RateLimited over the rate
            if isinstance(outcome, list):  # a full set: ``admit_direct`` asks which ended
                return None
            slot = outcome
        if any(isinstance(r, Exception) for r in replies) or (looks and replies[0] is not None):
            if slot is not None:  # an entry: recorded as a hit, or refused, by ``admit_direct``
                await _release_on_loop(state, slot)
            return None
        generations = entries.generations_replied(keys, replies[1:] if looks else replies)
        counters = state.redis.pipeline(transaction=False)
        if looks:
            record_lookup(counters, tenant_id=principal.tenant_id, level=Level.EXECUTION, hit=False)
        cache = cache_runs.prepare(state.redis, scope=scope, config=None, generations=generations)
    return DirectAdmission(timeout_s=timeout_s, slot=slot, hit=None, cache=cache,
                           counters=counters)  # fmt: skip


async def _release_on_loop(state: GatewayState, slot: limits.Reservation) -> None:
    """Give back a slot taken on the event loop (a lost release lapses with the call's timeout)."""
    pipe = state.redis.pipeline(transaction=False)
    limits.queue_release(pipe, reservation=slot)
    try:
        await state.lines.send_queued(pipe)
    except redis.RedisError as exc:
        log.warning("could not give back a rate-limit slot: %s", exc)


def _syntax_error(language: str, code: str) -> dict[str, Any] | None:
    """Python by ``ast``; TypeScript by tree-sitter where it is sure (Deno judges the rest)."""
    if language == "typescript":
        return find_typescript_syntax_error(code)
    return find_syntax_error(code)


async def admit_submission(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    principal: Principal,
    capability_id: str | None = None,
    extras: dict[str, Any] | None = None,
) -> Admission:
    """``admit`` off the event loop: checked and recorded (or a cache hit), not yet enqueued."""
    return await to_thread.run_sync(
        lambda: admit(
            state,
            request=request,
            principal=principal,
            capability_id=capability_id,
            extras=extras,
        )
    )


def send_counters(counters: redis.client.Pipeline) -> None:
    """Send a submission's counters and events; the submission is recorded already, so a lost
    counter or event is logged, never its failure."""
    try:
        counters.execute()
    except redis.RedisError:
        log.warning(
            "could not send %d counters/events of a submission", len(counters), exc_info=True
        )


def _submission_audit(
    principal: Principal, request: ExecutionRequest, *, capability_id: str | None
) -> tuple[str, dict[str, Any]]:
    """The audit row of one submitted execution (arguments hashed, never stored), as
    ``create_execution`` writes it."""
    return SUBMIT_AUDIT_SQL, submit_audit_params(
        action=AuditAction.CAPABILITY_EXECUTE if capability_id else AuditAction.EXECUTE,
        key_id=principal.key_id,
        args={"code": request.code, "args": request.args, "tools": request.tools},
        details={"capability_id": str(capability_id)} if capability_id else None,
    )


def _settle(state: GatewayState, *, slot: limits.Reservation, execution_id: str | None) -> None:
    """Bind the slot to the new execution; an idempotent repeat started nothing: give it back."""
    if execution_id is None:
        limits.release(state.redis, reservation=slot)
    else:
        limits.bind(state.redis, reservation=slot, execution_id=execution_id)
