"""Serve the RPC channel: compete with other replicas on the request list, answer each call once.

Every request gets exactly one reply (RPUSH + EXPIRE, atomically) and is executed at most
once: a request whose deadline passed while it was queued is answered ``timeout`` without
running, and a request that started is never pushed back to a list.

Routing across replicas: each replica keeps its own session per server, so one replica's
server can be down while another's is ready. Bridges push every call on the one shared
list; a replica that pops a call for a server it does not have ready, while another live
replica (by its heartbeat) has it ready, hands the untouched request (never claimed, never
run) to that server's list (``rpc_server_requests_key``), which only replicas with the
server ready BLPOP, ahead of the shared list. A request popped from a server's list is
handled there, never forwarded (one hop), so it cannot ping-pong; if its server went down
meanwhile it is answered ``server_unavailable`` like any call. When no live replica has the server
ready the call is answered ``server_unavailable`` at once, as before; calls left on a
server's list when its last ready replica stops serving it are moved back to the shared
list by ``requeue_stranded`` (they never started), where they meet that prompt answer.
Per-server lists rather than pushing back to the shared list: a pushed-back call could be
popped again by the same replica any number of times, while a server's list is read only
by replicas that can serve it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from services.toolhost.approvals import ApprovalDesk
from services.toolhost.connect_ask import ConnectAsker
from services.toolhost.direct_tasks import TaskEnds
from services.toolhost.peruser import PerUserServer
from services.toolhost.policy import decide_call, decide_read, decision_commands
from services.toolhost.registry import (
    AuthorizationRequired,
    ServerUnavailable,
    ToolRegistry,
    UnknownTool,
)
from services.toolhost.resources import serve_resource
from services.toolhost.scope import GrantRead, OnRefusal, ScopeGuard
from services.toolhost.tracing import call_span
from services.toolhost.upstream import CallContext, Caller
from shared import metrics
from shared.auth.grants import Grant
from shared.errors import ErrorType
from shared.logs import bind
from shared.policy.engine import Decision, PolicyEngine
from shared.queues import (
    RPC_REQUESTS,
    grant_key,
    rpc_claim_key,
    rpc_reply_key,
    rpc_server_requests_key,
)
from shared.rpc import upstream
from shared.rpc.protocol import (
    CALL_ID_PATTERN,
    GATEWAY_CALLER,
    ResourceRequest,
    RpcReply,
    RpcRequest,
    decode_message,
    encode,
)
from shared.rpc.wire import Command, Lines, raise_refused

log = logging.getLogger(__name__)

# The capabilities a call's execution's client relays, read with its grant: a 1-tuple (its
# value None: nobody listens), or None when not read (read then if a server needs them).
Declared = tuple[list[str] | None] | None

# BLPOP wakes at least this often so a stop request is noticed without cancelling a pop
# (cancelling one after Redis removed the item would lose the call).
POLL_TIMEOUT_S = 1.0
_SHARED_LIST = (RPC_REQUESTS, RPC_REQUESTS.encode())  # as BLPOP names it

ServingElsewhere = Callable[[str], Awaitable[bool]]


class RpcServer:
    """One consumer of the request list, running up to ``max_concurrency`` calls at once."""

    def __init__(
        self,
        *,
        redis_url: str,
        registry: ToolRegistry,
        reply_ttl_s: int,
        max_concurrency: int = 64,
        claim_as: str | None = None,
        on_refusal: OnRefusal | None = None,
        serving_elsewhere: ServingElsewhere | None = None,
        policy: PolicyEngine | None = None,
        approvals: ApprovalDesk | None = None,
        task_ends: TaskEnds | None = None,
    ) -> None:
        self._registry = registry
        # Records the end of a direct call made as an MCP task (None: such a call is refused).
        self._task_ends = task_ends
        # Pauses the calls a permit sends for approval (None: such calls are refused).
        self._approvals = approvals or ApprovalDesk(None, timeout_s=1)
        # Decides each call after the grant's checks (None: no policy file; nothing decided).
        self._policy = policy or PolicyEngine(None)
        # Whether another live replica has a server ready: then a call this replica
        # cannot serve is handed to it instead of failing.
        self._serving_elsewhere = serving_elsewhere
        # Our heartbeat key, written on each call's claim key before it runs: a caller
        # whose reply is late sees the claim outlive our heartbeat and stops waiting.
        self._claim_as = claim_as
        self._reply_ttl_s = reply_ttl_s
        # The popping connection blocks, so it is separate from the one replies go out on.
        self._pop = Lines(redis_url, timeout_s=None)  # BLPOP carries its own timeout
        self._out = aioredis.Redis.from_url(redis_url, socket_timeout=10)
        # Each call's two round trips (claim + grant read; reply + latency sample).
        self._lines = Lines(redis_url, timeout_s=10)
        self._scope = ScopeGuard(self._out, on_refusal=on_refusal)
        # Asks a person to connect a server through their MCP client (URL elicitation).
        self._connect = ConnectAsker(redis_url)
        # Taken before each pop: a saturated replica stops popping and leaves the work to
        # other replicas instead of queueing it in memory.
        self._slots = asyncio.Semaphore(max_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self.handled = 0
        # The servers this replica added to the latency histogram's label set lately.
        self._labels_sent = metrics.LabelsSent()

    @property
    def inflight(self) -> int:
        """Calls running right now."""
        return len(self._tasks)

    def stop(self) -> None:
        """Stop popping new requests (running calls finish; see ``drain``)."""
        self._stopping.set()

    async def serve(self) -> None:
        """Pop and dispatch until ``stop()``."""
        failures = 0
        while not self._stopping.is_set():
            await self._slots.acquire()
            try:
                (popped,) = await self._pop.send(("BLPOP", *self._lists(), POLL_TIMEOUT_S))
                raise_refused(popped)
                failures = 0
            except RedisError as exc:
                self._slots.release()
                failures += 1
                delay = min(5.0, 0.1 * 2**failures)
                log.warning("RPC channel: Redis error (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            except BaseException:
                self._slots.release()
                raise
            if popped is None:
                self._slots.release()
                continue
            task = asyncio.create_task(self._handle(popped[0], popped[1]))
            self._tasks.add(task)
            task.add_done_callback(self._done)
            # The call's claim goes out before the next pop: the caller waits on the one,
            # nobody yet on the other.
            await asyncio.sleep(0)

    def _lists(self) -> list[str]:
        """The lists to pop: the forwarded calls of each server ready here, then the shared one."""
        ready = [b.name for b in self._registry.backends() if b.state == "ready"]
        return [*(rpc_server_requests_key(name) for name in ready), RPC_REQUESTS]

    async def requeue_stranded(self, servers: list[str]) -> int:
        """Move calls waiting on the lists of ``servers`` (ready on no live replica) back to
        the shared list, where they are answered; they never started. Returns how many."""
        moved = 0
        for server in servers:
            while await self._out.lmove(rpc_server_requests_key(server), RPC_REQUESTS):
                moved += 1
        if moved:
            log.info("moved %d waiting call(s) for %s back to the shared list", moved, servers)
        return moved

    async def drain(self, *, timeout_s: float) -> None:
        """Wait for running calls (bounded); calls still running then are cancelled."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)

    async def aclose(self) -> None:
        """Close every Redis connection."""
        await self._pop.aclose()
        await self._out.aclose()
        await self._lines.aclose()
        await self._connect.aclose()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        self.handled += 1

    async def _handle(self, source: bytes | str, raw: bytes | str) -> None:
        started = time.monotonic()
        try:
            request = decode_message(raw)
        except ValueError as exc:
            call_id = _salvage_call_id(raw)
            if call_id is None:
                log.warning("dropped an RPC request without a usable call_id: %.200r", raw)
                return
            await self._send(
                RpcReply.failure(
                    call_id=call_id,
                    type=ErrorType.INVALID_REQUEST,
                    message=f"invalid request: {exc}",
                )
            )
            return
        # This call's own task: the ids stay on every line logged while it is handled.
        bind(execution_id=request.execution_id, tool_call_id=_tool_call_id(request))
        if source in _SHARED_LIST and await self._forwarded(request, raw):
            return
        decided: list[Decision] = []  # the policy's decision on the request, if it made one
        if isinstance(request, ResourceRequest):
            await self._claim(request)
            refusal = await self._scope.resource_refusal(
                request, server_tools=self._tool_ids(request.server)
            )
            if refusal is not None:
                reply = RpcReply.failure(
                    call_id=request.call_id, type=refusal[0], message=refusal[1]
                )
            else:
                reply = await self._decided_read(request, started, decided)
            await self._send(reply, then=decision_commands(next(iter(decided), None)))
            return
        read, declared = await self._claim_and_read_grant(request)
        decided = []
        async with call_span(request) as record:
            if request.end is not None and self._task_ends is not None:  # a direct task's
                reply = await self._task_ends.run(  # call: its end recorded here
                    request, lambda: self._execute(request, started, read, declared, decided)
                )
            else:
                reply = await self._execute(request, started, read, declared, decided)
            record(reply)
        # The latency sample and the decision's count ride on the reply's round trip.
        then = [
            *self._latency_sample(request, reply),
            *decision_commands(next(iter(decided), None)),
        ]
        await self._send(reply, then=then)
        self._log(request, reply)

    async def _decided_read(
        self, request: ResourceRequest, started: float, decided: list[Decision]
    ) -> RpcReply:
        """Serve a resources request; an execution's read of one resource is decided by
        policy first (a denied read never reaches the server; the decision is put in
        ``decided``)."""
        if (
            self._policy.configured
            and request.op == "read_resource"
            and request.execution_id != GATEWAY_CALLER
        ):
            grant = (await self._scope.read_grant(request.execution_id)).value
            if not isinstance(grant, Grant):  # read a moment ago for the scope check
                return RpcReply.failure(
                    call_id=request.call_id,
                    type=ErrorType.TOOL_NOT_ALLOWED,
                    message="this execution's grant is gone",
                )
            decision = decide_read(self._policy, request, grant)
            decided.extend([decision] if decision is not None else [])
            if decision is not None and not decision.allowed:
                return RpcReply.failure(
                    call_id=request.call_id,
                    type=ErrorType.POLICY_DENIED,
                    message=f"{request.uri}: denied by policy ({decision.reason}); not read",
                    policies=list(decision.policies),
                )
        return await serve_resource(
            self._registry, request, started, await self._resource_caller(request)
        )

    async def _resource_caller(self, request: ResourceRequest) -> Caller | None:
        """Whom a resources request runs for, where its server acts for the person calling:
        the gateway's own request says (``caller``); an execution's, its grant."""
        if request.execution_id == GATEWAY_CALLER:
            on = request.caller
            return None if on is None else Caller(on.tenant_id, on.user, on.subject_token)
        if not isinstance(self._registry.get(request.server or ""), PerUserServer):
            return None  # its grant is read only where it matters
        grant = (await self._scope.read_grant(request.execution_id)).value
        return Caller(grant.tenant_id, grant.user, grant.subject_token) if isinstance(
            grant, Grant) else None  # fmt: skip

    def _tool_ids(self, server: str | None) -> list[str] | None:
        """The ids of the tools ``server`` lists here; None when it is not serving here."""
        backend = self._registry.get(server) if server is not None else None
        if backend is None:
            return None
        # A server acting for people serves them whatever its own state (an OAuth server's
        # is needs_user_authorization): its scope is always checked.
        if backend.state != "ready" and not isinstance(backend, PerUserServer):
            return None
        return [f"{server}:{name}" for name in getattr(backend, "tools", None) or {}]

    def _latency_sample(self, request: RpcRequest, reply: RpcReply) -> list[Command]:
        """The commands recording the call's latency per server (configured servers only:
        bounded labels)."""
        server = request.tool.partition(":")[0]
        if self._registry.get(server) is None:
            return []
        return metrics.observation_commands(
            "tool_call_latency_seconds",
            reply.duration_ms / 1000,
            label=server,
            labels=self._labels_sent,
        )

    def _log(self, request: RpcRequest, reply: RpcReply) -> None:
        outcome = "ok" if reply.ok else str(reply.error.type if reply.error else "error")
        log.info("tool call %s: %s in %.1f ms", request.tool, outcome, reply.duration_ms)

    async def _forwarded(self, request: RpcRequest | ResourceRequest, raw: bytes | str) -> bool:
        """Hand a call for a server not ready here to the replicas that have it ready (the
        request is pushed as popped: nothing about it ran or was claimed)."""
        server = request.server
        if server is None or self._serving_elsewhere is None or request.deadline <= time.time():
            return False
        backend = self._registry.get(server)
        if backend is not None and backend.state == "ready":
            return False
        try:
            if not await self._serving_elsewhere(server):
                return False
            await self._out.rpush(rpc_server_requests_key(server), raw)
        except RedisError as exc:  # answered here instead (server_unavailable)
            log.warning("could not forward call %s for %s: %s", request.call_id, server, exc)
            return False
        log.debug("call %s: %s is not ready here; forwarded", request.call_id, server)
        return True

    async def _claim(self, request: RpcRequest | ResourceRequest) -> None:
        """Record which replica runs the call (one SET; expires with the call's reply)."""
        if self._claim_as is None:
            return
        ttl = self._claim_ttl(request)
        try:
            await self._out.set(rpc_claim_key(request.call_id), self._claim_as, ex=ttl)
        except RedisError as exc:  # the reply cannot go out either; the caller times out
            log.warning("could not claim call %s: %s", request.call_id, exc)

    def _claim_ttl(self, request: RpcRequest | ResourceRequest) -> int:
        """A claim expires with the call's reply."""
        return max(1, int(request.deadline - time.time()) + self._reply_ttl_s)

    async def _claim_and_read_grant(self, request: RpcRequest) -> tuple[GrantRead, Declared]:
        """``_claim`` and the reads of the call's grant and of the capabilities its client
        relays (None: not read), in one round trip (the claim
        is written before the tool runs, as before).

        The client does not retry (``from_url``: no retries), so the first command on a
        pooled connection that died with Redis fails. Then both are done again as two
        commands, as before the pipeline: a failed claim is tolerated (``_claim``), a
        grant that cannot be read refuses the call. Both commands are idempotent."""
        if self._claim_as is None:
            return await self._scope.read_grant(request.execution_id), None
        claim = ("SET", rpc_claim_key(request.call_id), self._claim_as)
        try:
            _, raw, advertised = await self._lines.send(
                (*claim, "EX", self._claim_ttl(request)),
                ("GET", grant_key(request.execution_id)),
                ("GET", upstream.advertised_key(request.execution_id)),
            )
        except RedisError as exc:
            log.info(
                "claim and grant read of call %s failed (%s); again, one by one",
                request.call_id,
                exc,
            )
            await self._claim(request)
            return await self._scope.read_grant(request.execution_id), None
        read = GrantRead.failed(raw) if isinstance(raw, ResponseError) else GrantRead.of(raw)
        if isinstance(advertised, ResponseError):
            return read, None
        try:
            return read, (upstream.advertised_of(advertised),)
        except ValueError:  # not JSON: read again when needed, as before
            return read, None

    async def _execute(
        self,
        request: RpcRequest,
        started: float,
        read: GrantRead,
        declared: Declared,
        decided: list[Decision],
    ) -> RpcReply:
        """Check, decide and run one call; the policy decision, if any, is put in ``decided``."""
        call_id, tool = request.call_id, request.tool

        def fail(
            kind: ErrorType,
            message: str,
            policies: list[str] | None = None,
            approval: dict[str, Any] | None = None,
            url: str | None = None,
        ) -> RpcReply:
            elapsed = (time.monotonic() - started) * 1000
            return RpcReply.failure(
                call_id=call_id,
                type=kind,
                message=message,
                duration_ms=elapsed,
                policies=policies,
                approval=approval,
                url=url,
            )

        remaining = request.deadline - time.time()
        if remaining <= 0:
            return fail(ErrorType.TIMEOUT, f"{tool}: deadline passed while queued; not run")
        if request.allowed is not None and tool not in request.allowed:
            return fail(ErrorType.TOOL_NOT_ALLOWED, f"{tool} is not in this execution's tool scope")
        # The request's own `allowed` is the bridge's word; the grant record is the gateway's.
        refusal = await self._scope.refusal(request, read=read)
        if refusal is not None:
            return fail(*refusal)
        grant = read.value
        if isinstance(grant, Grant):  # the refusal above fails every other case
            decision = decide_call(self._policy, self._registry, request, grant)
            if decision is not None:
                decided.append(decision)
                if not decision.allowed:
                    self._scope.report_denied(request, decision, grant)
                    message = f"{tool}: denied by policy ({decision.reason}); it was not called"
                    return fail(ErrorType.POLICY_DENIED, message, list(decision.policies))
                if decision.approval is not None:
                    held = await self._approvals.hold(request, grant, decision)
                    if held is not None:
                        return fail(*held)
        try:
            backend, name = self._registry.resolve(tool)
            async with asyncio.timeout(remaining):
                caller = (
                    Caller(grant.tenant_id, grant.user, grant.subject_token)
                    if isinstance(grant, Grant)
                    else None
                )
                context = CallContext(
                    request.execution_id,
                    tool,
                    request.trace_call_id,
                    request.deadline,
                    caller,
                    declared=declared[0] if declared is not None else None,
                    declared_read=declared is not None,
                )
                try:
                    outcome = await backend.call_tool(name, request.args, context=context)
                except AuthorizationRequired as exc:
                    # Asked through the caller's client (URL elicitation), they connected:
                    # the call is made again, once.
                    if not await self._connect.connected(request, exc):
                        raise
                    outcome = await backend.call_tool(name, request.args, context=context)
        except UnknownTool as exc:
            return fail(ErrorType.UNKNOWN_TOOL, str(exc))
        except ServerUnavailable as exc:
            return fail(ErrorType.SERVER_UNAVAILABLE, str(exc))
        except AuthorizationRequired as exc:
            return fail(ErrorType.AUTHORIZATION_REQUIRED, str(exc), url=exc.url)
        except TimeoutError:
            return fail(ErrorType.TIMEOUT, f"{tool} did not answer within {remaining:.3g}s")
        except Exception as exc:
            log.exception("call %s to %s failed unexpectedly", call_id, tool)
            return fail(ErrorType.INTERNAL_ERROR, f"{tool}: {type(exc).__name__}: {exc}")
        elapsed = (time.monotonic() - started) * 1000
        if not outcome.ok:
            return fail(ErrorType.TOOL_ERROR, outcome.error or "tool error")
        return RpcReply(call_id=call_id, ok=True, result=outcome.value, duration_ms=elapsed)

    async def _send(self, reply: RpcReply, *, then: Sequence[Command] = ()) -> None:
        """Deliver ``reply``; ``then``: commands sent after it on the same round trip (their
        failure is logged, it never costs the reply)."""
        try:
            payload = encode(reply)
        except (TypeError, ValueError) as exc:  # a result orjson cannot serialize
            payload = encode(
                RpcReply.failure(
                    call_id=reply.call_id,
                    type=ErrorType.INTERNAL_ERROR,
                    message=f"result is not JSON-serializable: {exc}",
                    duration_ms=reply.duration_ms,
                )
            )
        key = rpc_reply_key(reply.call_id)
        # MULTI: the reply never exists without its expiry, so unread replies cannot pile up.
        transaction: list[Command] = [
            ("MULTI",),
            ("RPUSH", key, payload),
            ("EXPIRE", key, self._reply_ttl_s),
            ("EXEC",),
        ]
        try:
            replies = await self._lines.send(*transaction, then=then)
        except RedisError as exc:
            # The caller will see a timeout; re-running the tool is not an option. (A
            # connection closed by a Redis restart is replaced before the send: ``Lines``.)
            log.error("could not deliver the reply to call %s: %s", reply.call_id, exc)
            return
        delivered = replies[len(transaction) - 1]
        if not isinstance(delivered, list) or any(isinstance(r, ResponseError) for r in delivered):
            log.error("could not deliver the reply to call %s: %s", reply.call_id, delivered)
        refused = [r for r in replies[len(transaction) :] if isinstance(r, ResponseError)]
        if refused:  # a lost sample must not cost the reply
            log.debug("sent after the reply to call %s, refused: %s", reply.call_id, refused)


def _tool_call_id(request: RpcRequest | ResourceRequest) -> str:
    """The call's id in the execution's trace when it has one, else its RPC id."""
    return getattr(request, "trace_call_id", None) or request.call_id


def _salvage_call_id(raw: bytes | str) -> str | None:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    call_id = data.get("call_id") if isinstance(data, dict) else None
    if isinstance(call_id, str) and re.match(CALL_ID_PATTERN, call_id):
        return call_id
    return None
