"""The toolhost's own check of every RPC request: the execution's grant record and its caller's rate.

The bridge already refuses calls outside an execution's scope, but anything that can push
to the request list (a compromised worker, a forged message) reaches the toolhost too, so
each request is checked here against the grant the gateway wrote at submission
(``shared.auth.grants``). No grant, no call: fail closed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from shared.auth.grants import Grant, load_grant
from shared.errors import ErrorType
from shared.logs import bind
from shared.queues import grant_key, tool_calls_key
from shared.rpc.protocol import GATEWAY_CALLER, ResourceRequest, RpcRequest

if TYPE_CHECKING:
    from shared.policy.engine import Decision

log = logging.getLogger(__name__)

# A per-minute counter lives past its minute so a late INCR never starts a fresh window.
COUNTER_TTL_S = 120


# Called for each call refused as outside its grant (no grant, or a tool it does not allow)
# or by policy, with the refusal's details (``type``, a denial's ``policies``): the toolhost
# writes it to the audit log.
OnRefusal = Callable[[RpcRequest, str, Grant | None, dict[str, Any]], None]


def record_refusal(
    *, request: RpcRequest, kind: ErrorType, reason: str, grant: Grant | None
) -> None:
    """Report one refused call (a structured warning; the place to also write an audit record)."""
    log.warning(
        "refused tool call %s to %s for execution %s: %s (%s)",
        request.call_id, request.tool, request.execution_id, kind, reason,
        extra={
            "event": "tool_call_refused",
            "error_type": str(kind),
            "execution_id": request.execution_id,
            "call_id": request.call_id,
            "tool": request.tool,
            "tenant_id": grant.tenant_id if grant else None,
            "key_id": grant.key_id if grant else None,
        },
    )  # fmt: skip


@dataclass(frozen=True)
class GrantRead:
    """An execution's grant as read from Redis: the record (None: there is none), or why it
    could not be read. A caller may read it on a pipeline of its own (``grant_key``)."""

    value: Grant | tuple[ErrorType, str] | None

    @classmethod
    def of(cls, raw: bytes | str | None) -> GrantRead:
        return cls(load_grant(raw))

    @classmethod
    def failed(cls, exc: Exception) -> GrantRead:
        return cls((ErrorType.INTERNAL_ERROR, f"cannot read the grant of this execution: {exc}"))


class ScopeGuard:
    """Checks one request against its execution's grant and counts it against its caller's rate."""

    def __init__(self, redis: aioredis.Redis, *, on_refusal: OnRefusal | None = None) -> None:
        self._redis = redis
        self._on_refusal = on_refusal

    async def refusal(
        self, request: RpcRequest, *, read: GrantRead | None = None
    ) -> tuple[ErrorType, str] | None:
        """Why the call may not run (type, message), or None when it may. ``read``: the
        grant as the caller read it already, else it is read here."""
        grant = (read or await self.read_grant(request.execution_id)).value
        if isinstance(grant, tuple):
            return grant
        if grant is None:
            reason = (
                f"execution {request.execution_id!r} has no tool grant (not submitted "
                "through the gateway, or it already ended)"
            )
            return self._refuse(request, ErrorType.TOOL_NOT_ALLOWED, reason, grant)
        bind(tenant_id=grant.tenant_id)  # on the rest of this call's log lines
        if not grant.allows(request.tool):
            reason = f"{request.tool} is not in this execution's tool scope"
            return self._refuse(request, ErrorType.TOOL_NOT_ALLOWED, reason, grant)
        if grant.tool_calls_per_min is not None:
            return await self._rate(request, grant, grant.tool_calls_per_min)
        return None

    async def resource_refusal(
        self, request: ResourceRequest, *, server_tools: Iterable[str] | None
    ) -> tuple[ErrorType, str] | None:
        """Why an execution may not read this server's resources, or None when it may.

        The rule the bridge applies, checked against the grant: one of the server's tools
        (``server_tools``, ids) must be in the execution's scope. ``server_tools`` None: the
        server is not serving here, and the answer will say so. The gateway's own requests
        (``GATEWAY_CALLER``) carry no execution; the gateway checked its caller's scope.
        """
        if request.execution_id == GATEWAY_CALLER or (
            request.server is not None and server_tools is None
        ):
            return None
        grant = (await self.read_grant(request.execution_id)).value
        if isinstance(grant, tuple):
            return grant
        if grant is None:
            reason = f"execution {request.execution_id!r} has no tool grant"
        elif request.server is None:
            reason = "an execution reads one server's resources; listing every server's is not"
        elif not any(grant.allows(tool) for tool in server_tools or ()):
            reason = (
                f"reading resources of server {request.server!r} needs one of its tools in "
                "this execution's tool scope"
            )
        else:
            return None
        log.warning(
            "refused %s on %s for execution %s: %s",
            request.op, request.server, request.execution_id, reason,
            extra={"event": "resource_request_refused", "execution_id": request.execution_id},
        )  # fmt: skip
        return ErrorType.TOOL_NOT_ALLOWED, reason

    async def read_grant(self, execution_id: str) -> GrantRead:
        """The execution's grant record, or why it cannot be read."""
        try:
            return GrantRead.of(await self._redis.get(grant_key(execution_id)))
        except RedisError as exc:
            return GrantRead.failed(exc)

    async def _rate(
        self, request: RpcRequest, grant: Grant, limit: int
    ) -> tuple[ErrorType, str] | None:
        now = time.time()
        key = tool_calls_key(grant.rate_key, int(now // 60))
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, COUNTER_TTL_S)
                count, _ = await pipe.execute()
        except RedisError as exc:
            return ErrorType.INTERNAL_ERROR, f"cannot count this call against the rate: {exc}"
        if int(count) <= limit:
            return None
        retry_s = max(1, 60 - int(now % 60))  # fixed windows: the counter resets each minute
        reason = (
            f"this API key may make {limit} tool calls a minute and has used them; "
            f"retry in {retry_s}s"
        )
        return self._refuse(request, ErrorType.RATE_LIMITED, reason, grant)

    def _refuse(
        self, request: RpcRequest, kind: ErrorType, reason: str, grant: Grant | None
    ) -> tuple[ErrorType, str]:
        record_refusal(request=request, kind=kind, reason=reason, grant=grant)
        if self._on_refusal is not None and kind == ErrorType.TOOL_NOT_ALLOWED:
            self._on_refusal(request, reason, grant, {"type": str(kind)})
        return kind, reason

    def report_denied(self, request: RpcRequest, decision: Decision, grant: Grant) -> None:
        """A call the policy denied, to the audit log with the deciding policies."""
        if self._on_refusal is not None:
            details = {"type": str(ErrorType.POLICY_DENIED), "policies": list(decision.policies)}
            self._on_refusal(request, decision.reason, grant, details)
