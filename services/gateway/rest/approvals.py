"""REST for approvals: answer a paused call, and the inbox of calls waiting for the caller
(as it is, and as the dashboard shows it: personal data tokenised)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from services.gateway.ops.approvals import answer_approval, approvals_inbox
from services.gateway.ops.models.approvals import ApprovalAnswer
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(tags=["approvals"])


@router.post(
    "/v1/executions/{execution_id}/approvals/{call_id}",
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


@router.get("/v1/approvals", summary="The calls waiting for an answer that the caller may give")
async def inbox(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    """Oldest first: execution_id, call_id, server, tool, args, policies, approvers,
    expires_at, caller."""
    return {"pending": await approvals_inbox(state, principal=principal)}


@router.get(
    "/api/approvals",
    summary="The dashboard's approvals inbox: as /v1/approvals, personal data tokenised",
)
async def dashboard_inbox(state: State, principal: CurrentPrincipal) -> dict[str, Any]:
    """As ``GET /v1/approvals``, the arguments' personal data replaced by the tenant's tokens
    (docs/privacy.md), as the dashboard shows every run's data."""
    return {"pending": await approvals_inbox(state, principal=principal, tokenized=True)}
