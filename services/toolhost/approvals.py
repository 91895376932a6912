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
import logging
from typing import Any

from psycopg_pool import ConnectionPool

from shared.approvals.store import Redemption, open_approval, redeem
from shared.auth.grants import Grant
from shared.db import DictConnection
from shared.errors import ErrorType
from shared.policy.engine import Decision
from shared.rpc.protocol import RpcRequest

log = logging.getLogger(__name__)

# (type, message, policies, approval details): a reply that is not the call's result.
Hold = tuple[ErrorType, str, list[str], dict[str, Any] | None]


class ApprovalDesk:
    """Opens and redeems approvals in Postgres (``None`` pool: approvals cannot be kept, and
    a call that needs one is refused rather than run unasked)."""

    def __init__(self, pool: ConnectionPool[DictConnection] | None, *, timeout_s: int) -> None:
        self._pool = pool
        self.timeout_s = timeout_s

    async def hold(self, request: RpcRequest, grant: Grant, decision: Decision) -> Hold | None:
        """Why the call must not run now (None: it was approved and is redeemed: run it)."""
        rule = decision.approval
        assert rule is not None
        policies = list(rule.policies)
        if self._pool is None:
            return (
                ErrorType.APPROVAL_DENIED,
                f"{request.tool}: needs approval, and this toolhost keeps no approvals; not called",
                policies,
                None,
            )
        pool = self._pool
        call_id = request.approval or request.trace_call_id or request.call_id
        args = request.args

        def work() -> Redemption | dict[str, Any]:
            with pool.connection() as conn:
                if request.approval is None:
                    row = open_approval(
                        conn, execution_id=request.execution_id, call_id=call_id,
                        tool=request.tool, args=args, grant=grant, rule=rule,
                        timeout_s=self.timeout_s,
                    )  # fmt: skip
                    if row["status"] == "pending":
                        return row
                return redeem(conn, execution_id=request.execution_id, call_id=call_id, args=args)

        outcome = await asyncio.to_thread(work)
        if isinstance(outcome, dict):
            return _required(request.tool, outcome, policies)
        return _refusal(request.tool, outcome, policies)


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
