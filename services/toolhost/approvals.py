"""The toolhost's side of approvals: a call a permit sends for approval is paused, not run.

A first request for such a call opens its approval (``approvals``, pending) and is answered
``approval_required`` with the approval's id and expiry; nothing reaches the server. The
caller (a sandbox bridge, a direct call) waits for a person's answer, holding no toolhost
task, and sends the call again naming the approval: it runs only if approved, and only
once (the row moves to ``executed`` under its lock before the call goes out); denied,
expired or already used, it is refused with the reason. The policy decides the second
request afresh, so a reload that now forbids the call wins over an earlier approval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
import redis.asyncio as aioredis
from psycopg_pool import ConnectionPool
from redis.exceptions import RedisError

from shared import metrics
from shared.approvals.rules import CALLERS_HUMAN
from shared.approvals.store import Redemption, decide, open_approval, redeem
from shared.approvals.wait import ANSWER_TTL_SLACK_S, answer_payload
from shared.auth.grants import Grant
from shared.db import DictConnection
from shared.errors import ApprovalClosed, ErrorType
from shared.policy.engine import Decision
from shared.privacy.keys import PiiKeys
from shared.queues import approval_answer_key
from shared.rpc import upstream
from shared.rpc.protocol import RpcRequest

log = logging.getLogger(__name__)

# (type, message, policies, approval details): a reply that is not the call's result.
Hold = tuple[ErrorType, str, list[str], dict[str, Any] | None]


class ApprovalDesk:
    """Opens and redeems approvals in Postgres, the call's arguments sealed with ``keys``
    (``None`` pool or keys: approvals cannot be kept, and a call that needs one is refused
    rather than run unasked)."""

    def __init__(
        self,
        pool: ConnectionPool[DictConnection] | None,
        *,
        timeout_s: int,
        keys: PiiKeys | None = None,
        redis: aioredis.Redis | None = None,
    ) -> None:
        self._pool = pool
        self._keys = keys
        self.timeout_s = timeout_s
        # Asks the caller's own person through their MCP client (elicitation) when it
        # declared the capability; None: approvals are answered over REST only.
        self._redis = redis
        self._asking: set[asyncio.Task[None]] = set()

    async def hold(self, request: RpcRequest, grant: Grant, decision: Decision) -> Hold | None:
        """Why the call must not run now (None: it was approved and is redeemed: run it)."""
        rule = decision.approval
        assert rule is not None
        policies = list(rule.policies)
        if self._pool is None or self._keys is None:
            return (
                ErrorType.APPROVAL_DENIED,
                f"{request.tool}: needs approval, and this toolhost keeps no approvals; not called",
                policies,
                None,
            )
        pool, keys = self._pool, self._keys
        call_id = request.approval or request.trace_call_id or request.call_id
        args = request.args

        def work() -> Redemption | dict[str, Any]:
            with pool.connection() as conn:
                if request.approval is None:
                    row = open_approval(
                        conn, keys, execution_id=request.execution_id, call_id=call_id,
                        tool=request.tool, args=args, grant=grant, rule=rule,
                        timeout_s=self.timeout_s,
                    )  # fmt: skip
                    if row["status"] == "pending":
                        return row
                return redeem(conn, execution_id=request.execution_id, call_id=call_id, args=args)

        outcome = await asyncio.to_thread(work)
        if isinstance(outcome, dict):
            if outcome.get("opened") and self._redis is not None:
                await self._count("requested")
                task = asyncio.create_task(self._ask_caller(request, outcome))
                self._asking.add(task)
                task.add_done_callback(self._asking.discard)
            return _required(request.tool, outcome, policies)
        held = _refusal(request.tool, outcome, policies)
        if held is None:
            await self._count("executed")
        elif held[0] in (ErrorType.APPROVAL_DENIED, ErrorType.APPROVAL_TIMEOUT):
            await self._count(str(held[0]))
        return held

    async def _count(self, outcome: str) -> None:
        """``agentcards_approvals_total{outcome}``; a metric is not worth failing the call."""
        if self._redis is None:
            return
        with contextlib.suppress(RedisError):
            await self._redis.execute_command(
                *metrics.labelled_incr_command("approvals_total", outcome)
            )

    async def _ask_caller(self, request: RpcRequest, row: dict[str, Any]) -> None:
        """Ask the caller's person through their MCP client (a form elicitation: the server,
        tool and arguments; approve or not, a reason), when the client declared elicitation;
        their answer is recorded as any other (an approver's earlier answer stands)."""
        assert self._redis is not None and self._pool is not None
        redis, pool = self._redis, self._pool
        try:
            capabilities = await upstream.advertised(redis, execution_id=request.execution_id)
        except RedisError:
            return
        if not capabilities or "elicitation" not in capabilities:
            return
        server, _, tool = request.tool.partition(":")
        args = orjson.dumps(request.args).decode()[:2000]
        question = upstream.ClientRequest(
            id=upstream.new_request_id(),
            execution_id=request.execution_id,
            method="elicitation/create",
            params={
                "mode": "form",
                "message": f"Approve {server}:{tool} with {args}? (policy "
                f"{', '.join(row['policies'])} asks for approval)",
                "requestedSchema": APPROVAL_FORM,
            },
            server=server,
            tool=request.tool,
            trace_call_id=request.trace_call_id,
            deadline=row["expires_at"].timestamp(),
        )
        try:
            reply = await upstream.ask(redis, question)
        except RedisError as exc:
            log.warning("could not ask the caller about %s: %s", request.tool, exc)
            return
        result = reply.result if reply is not None and reply.error is None else None
        if not result or result.get("action") not in ("accept", "decline"):
            return  # cancelled or unanswered: the approval stays open for REST
        content = result.get("content") or {}
        approve = result["action"] == "accept" and content.get("approve") is True
        reason = content.get("reason") if isinstance(content.get("reason"), str) else None

        def record() -> None:
            with pool.connection() as conn:
                decide(
                    conn, tenant_id=row["tenant_id"], execution_id=request.execution_id,
                    call_id=row["call_id"], approve=approve, reason=reason, by=CALLERS_HUMAN,
                    refusal=lambda _: None,  # the caller's own person answers for them
                    key_id=row["caller_key"], user_id=row["caller_user"],
                )  # fmt: skip

        try:
            await asyncio.to_thread(record)
            await redis.set(
                approval_answer_key(request.execution_id, row["call_id"]),
                answer_payload(approve=approve, by=CALLERS_HUMAN, reason=reason),
                ex=self.timeout_s + ANSWER_TTL_SLACK_S,
            )
        except ApprovalClosed:
            pass  # someone answered over REST first: that answer stands
        except (RedisError, OSError) as exc:
            log.warning("the caller's answer about %s not announced: %s", request.tool, exc)


# The form an MCP client shows its person for a paused call.
APPROVAL_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve this call"},
        "reason": {"type": "string", "title": "Reason (optional)"},
    },
    "required": ["approve"],
}


def _required(tool: str, row: dict[str, Any], policies: list[str]) -> Hold:
    approval = {"call_id": row["call_id"], "expires_at": row["expires_at"].timestamp()}
    who = ", ".join(row["approvers"]) or "an admin"
    message = f"{tool}: waiting for approval by {who} (policies {', '.join(policies)})"
    return ErrorType.APPROVAL_REQUIRED, message, policies, approval


def _refusal(tool: str, outcome: Redemption, policies: list[str]) -> Hold | None:
    if outcome.run:
        return None
    row = outcome.row or {}
    if outcome.status == "pending":
        return _required(tool, row, policies)
    if outcome.status == "denied":
        reason = f": {row['reason']}" if row.get("reason") else ""
        answer = {"by": row.get("decided_by"), "reason": row.get("reason")}
        message = f"{tool}: denied by {row.get('decided_by')}{reason}; it was not called"
        return ErrorType.APPROVAL_DENIED, message, policies, answer
    if outcome.status == "expired":
        message = f"{tool}: nobody answered the approval in time; it was not called"
        return ErrorType.APPROVAL_TIMEOUT, message, policies, None
    if outcome.status == "changed":
        message = f"{tool}: the arguments are not the ones approved; it was not called"
        return ErrorType.APPROVAL_DENIED, message, policies, None
    if outcome.status == "executed":
        message = f"{tool}: this approval was used already; the call ran once and is not run again"
        return ErrorType.INVALID_REQUEST, message, policies, None
    return ErrorType.INVALID_REQUEST, f"{tool}: no such approval for this run", policies, None
