"""`POST /v1/executions/{id}/feedback` and the MCP `report_execution` tool: an agent's verdict."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.inputs import RequestModel


class ExecutionFeedback(RequestModel):
    """Whether a finished run did what it was for."""

    ok: bool = Field(
        description="false: the run was wrong (a bad answer, an empty one): it is taken back "
        "as evidence; the capability it alone created is deleted, one it counted for counts "
        "it as a failure. true: recorded only"
    )
    reason: str | None = Field(default=None, max_length=2000, description="why, in a sentence")


class CapabilityUndone(BaseModel):
    """What became of the capability a run reported wrong had taught."""

    id: str
    name: str
    action: str = Field(description="`deleted` or `counted_as_failure`")


class FeedbackResult(BaseModel):
    """The verdict as recorded, and what it undid."""

    execution_id: str
    ok: bool
    reason: str | None
    capability: CapabilityUndone | None = Field(
        description="the capability the run had taught and what became of it; null if none"
    )
