"""`POST /v1/pii/resolve`: an admin key reads the values behind its tenant's tokens (audited)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from services.gateway.ops.pii import resolve
from services.gateway.rest.deps import CurrentPrincipal, State

router = APIRouter(prefix="/v1/pii", tags=["privacy"])
# Only what a run can return (⟨KIND_16 hex⟩): anything else is a 422 naming it, never a query
# (a NUL or other text Postgres refuses would otherwise reach the database).
Token = Annotated[str, StringConstraints(pattern=r"^\u27e8[A-Z]{2,12}_[0-9a-f]{16}\u27e9$")]


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[Token] = Field(
        min_length=1, max_length=100, description="tokens as a run returned them (⟨EMAIL_…⟩)"
    )


@router.post("/resolve", summary="The values behind tokens (admin keys only, audited)")
async def resolve_tokens(
    state: State, principal: CurrentPrincipal, body: ResolveRequest
) -> dict[str, Any]:
    """Tokens of the caller's tenant that are still valid resolve; others are listed as
    `unresolved`. Each call is an audit row naming the tokens, never the values."""
    return await resolve(state, principal=principal, tokens=body.tokens)
