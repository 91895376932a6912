"""An agent's verdict on a finished run (REST and MCP): a wrong run stops being evidence."""

from __future__ import annotations

from services.gateway.ops.db import in_pool
from services.gateway.ops.models.feedback import ExecutionFeedback, FeedbackResult
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.learning import unteach


async def report_execution(
    state: GatewayState, *, execution_id: str, body: ExecutionFeedback, principal: Principal
) -> FeedbackResult:
    """Record the verdict and undo what a wrong run taught; NotFound for another tenant's run,
    Conflict while it still runs."""
    verdict = unteach.Verdict(ok=body.ok, reason=body.reason)
    done = await in_pool(
        state,
        lambda conn: unteach.report(
            conn, state.redis, tenant_id=principal.tenant_id, execution_id=execution_id,
            verdict=verdict,
        ),
    )  # fmt: skip
    return FeedbackResult.model_validate(done)
