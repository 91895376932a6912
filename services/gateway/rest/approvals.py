"""REST for approvals: answer a paused call, and the inbox of calls waiting for the caller."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from services.gateway.ops.approvals import answer_approval, approvals_inbox
from services.gateway.ops.models.approvals import ApprovalAnswer
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(prefix="/v1", tags=["approvals"])


@router.post(
    "/executions/{execution_id}/approvals/{call_id}",
    summary="Approve or deny a tool call paused for approval (docs/policy.md)",
)
async def answer(
    state: State, principal: CurrentPrincipal, execution_id: str, call_id: str, body: ApprovalAnswer
) -> dict[str, Any]:
    """404 for no such paused call in the tenant; 403 when the caller may not answer it (the
    policy's ``@approvers``; the caller themselves); 409 ``approval_closed`` when it was
    answered already, expired or its run ended; 422 for a malformed body."""
    return await answer_approval(
        state, principal=principal, execution_id=execution_id, call_id=call_id, answer=body
    )


@router.get("/approvals", summary="The calls waiting for an answer that the caller may give")
async def inbox(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    """Oldest first: execution_id, call_id, server, tool, args, policies, approvers, expires_at."""
    return {"pending": await approvals_inbox(state, principal=principal)}
