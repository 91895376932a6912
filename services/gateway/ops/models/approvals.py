"""The body of an answer to a paused call (``POST /v1/executions/{id}/approvals/{call_id}``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ApprovalAnswer(BaseModel):
    """Approve or deny one paused call; the reason goes to the audit log, the trace and (on a
    denial) the caller's error."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=2000)
