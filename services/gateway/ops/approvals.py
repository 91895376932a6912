"""Answering paused calls and listing them (REST; the approvals inbox of the dashboard).

An answer is recorded in Postgres under the approval's row lock (one answer wins, whichever
gateway takes it; a second is ``approval_closed``), audited with who, when and why, and
then announced on a short-lived Redis key the waiting caller looks at. The call itself is
run (once) by the toolhost when the caller sends it again.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from services.gateway.ops.db import in_pool
from services.gateway.ops.models.approvals import ApprovalAnswer
from services.gateway.state import GatewayState
from shared.approvals import rules
from shared.approvals.store import (
    close_unrun,
    decide,
    pending_of_tenant,
    pending_view,
    status_of,
)
from shared.approvals.wait import ANSWER_TTL_SLACK_S, answer_payload
from shared.auth.principal import Principal
from shared.db import DictConnection
from shared.privacy.keys import PiiKeys
from shared.queues import approval_answer_key
from shared.sandbox import privacy

log = logging.getLogger(__name__)


async def answer_approval(
    state: GatewayState,
    *,
    principal: Principal,
    execution_id: str,
    call_id: str,
    answer: ApprovalAnswer,
) -> dict[str, Any]:
    """Record ``principal``'s answer to a paused call; NotFound, Forbidden (not an approver)
    or ApprovalClosed (answered already, expired, run over) otherwise."""
    approve = answer.decision == "approve"
    by = rules.approver_name(principal)

    def write(conn: DictConnection) -> dict[str, Any]:
        return decide(
            conn, tenant_id=principal.tenant_id, execution_id=execution_id, call_id=call_id,
            approve=approve, reason=answer.reason, by=by,
            refusal=lambda row: rules.refusal(row, principal),
            key_id=principal.key_id, user_id=principal.user,
        )  # fmt: skip

    row = await in_pool(state, write)
    ttl = max(1, int(row["expires_at"].timestamp() - row["decided_at"].timestamp()))
    try:
        await state.aredis.set(
            approval_answer_key(execution_id, call_id),
            answer_payload(approve=approve, by=by, reason=answer.reason),
            ex=ttl + ANSWER_TTL_SLACK_S,
        )
    except redis.RedisError:  # the caller learns it when the approval's time is up
        log.warning("answer to %s/%s not announced; the caller finds it at expiry",
                    execution_id, call_id)  # fmt: skip
    log.info(
        "approval %s/%s: %s by %s", execution_id, call_id, answer.decision, by,
        extra={"event": "approval_decided", "execution_id": execution_id},
    )  # fmt: skip
    return {
        "execution_id": execution_id,
        "call_id": call_id,
        "status": row["status"],
        "decided_by": by,
        "reason": answer.reason,
    }


async def approvals_inbox(
    state: GatewayState, *, principal: Principal, tokenized: bool = False
) -> list[dict[str, Any]]:
    """The tenant's paused calls this principal may answer, oldest first, each naming its
    caller; ``tokenized`` (the dashboard's inbox): the arguments with the tenant's tokens in
    place of the personal data they hold, as the dashboard shows runs' output (the tokens go
    to the vault, so an admin can resolve them)."""

    def read(conn: DictConnection) -> list[dict[str, Any]]:
        return pending_of_tenant(conn, principal.tenant_id)

    rows = [r for r in await in_pool(state, read) if rules.refusal(r, principal) is None]
    if not rows:
        return []
    keys = PiiKeys.from_settings(state.settings)  # opens the arguments sealed in the rows
    views = [{**pending_view(r, keys), "caller": rules.caller_name(r)} for r in rows]
    if not tokenized or state.settings.pii == "off":
        return views
    tok = privacy.run_tokenizer(state.settings, principal.tenant_id)
    shown = [{**v, "args": tok.value(v["args"])} for v in views]
    if tok.produced:
        await in_pool(
            state,
            lambda conn: privacy.store_token_record(
                conn, settings=state.settings, tenant_id=principal.tenant_id, tok=tok
            ),
        )
    return shown


async def approval_status(
    state: GatewayState, *, execution_id: str, call_id: str, tenant_id: str
) -> str | None:
    """A paused call's approval status in the tenant (None: it never waited for one)."""
    return await in_pool(
        state,
        lambda conn: status_of(
            conn, tenant_id=tenant_id, execution_id=execution_id, call_id=call_id
        ),
    )


async def close_abandoned(
    state: GatewayState, *, execution_id: str, call_id: str, why: str
) -> None:
    """Close a direct call's approval that nothing will run (its client went away while it
    waited): out of the approvers' inbox, answered ``approval_closed``, audited. A failure
    leaves it open until it expires, as before."""
    try:
        closed = await in_pool(
            state,
            lambda conn: close_unrun(conn, execution_id=execution_id, call_id=call_id, why=why),
        )
    except Exception:  # the call is over either way: never fail its end for this
        log.exception("approval %s/%s not closed; it stays open until it expires",
                      execution_id, call_id)  # fmt: skip
        return
    if closed is not None:
        log.info(
            "approval %s/%s closed: %s", execution_id, call_id, why,
            extra={"event": "approval_closed", "execution_id": execution_id},
        )  # fmt: skip
