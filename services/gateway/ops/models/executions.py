"""What the executions listing, its breakdown and one execution's submission answer (REST)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from shared.executions.models import ExecutionView, view_from_row


class ExecutionListItem(ExecutionView):
    """One execution of the listing: the view, and who ran it when, and through what."""

    tenant_id: str
    started_at: str | None = Field(default=None, description="when a sandbox worker took it")
    capability_id: str | None = Field(
        default=None, description="the capability it ran (`POST /v1/capabilities/{id}/execute`)"
    )


class ExecutionPage(BaseModel):
    """`GET /v1/executions`: one page, newest first, and how many match the filters in all."""

    executions: list[ExecutionListItem]
    total: int = Field(description="executions matching the filters (every page)")
    limit: int
    offset: int


class ExecutionBreakdown(BaseModel):
    """`GET /v1/executions/breakdown`: the tenant's executions counted by status and error type."""

    total: int
    by_status: dict[str, int]
    by_error_type: dict[str, int] = Field(description="failed runs (any status) by error type")


class ExecutionSubmission(BaseModel):
    """`GET /v1/executions/{id}/submission`: what was submitted, as the sandbox received it."""

    id: str
    tenant_id: str
    code: str
    args: dict[str, Any]
    intent: str | None
    tools: list[str] | None = Field(description="the tool scope asked for; null: every tool")
    timeout_s: float
    capability_id: str | None
    worker: str | None = Field(description="the sandbox worker that ran it last")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def list_item(row: dict[str, Any]) -> ExecutionListItem:
    """An ``executions`` row as a listing item."""
    return ExecutionListItem(
        **view_from_row(row).model_dump(),
        tenant_id=str(row["tenant_id"]),
        started_at=_iso(row.get("started_at")),
        capability_id=str(row["capability_id"]) if row.get("capability_id") else None,
    )


def submission(row: dict[str, Any]) -> ExecutionSubmission:
    """An ``executions`` row's submitted code, arguments and scope."""
    return ExecutionSubmission(
        id=str(row["id"]),
        tenant_id=str(row["tenant_id"]),
        code=row["code"],
        args=row.get("args") or {},
        intent=row.get("intent"),
        tools=row.get("tools"),
        timeout_s=float(row["timeout_s"]),
        capability_id=str(row["capability_id"]) if row.get("capability_id") else None,
        worker=row.get("worker"),
    )


def breakdown(rows: list[dict[str, Any]]) -> ExecutionBreakdown:
    """Counts per (status, error type) rows summed per status and per error type."""
    by_status: dict[str, int] = {}
    by_error: dict[str, int] = {}
    for row in rows:
        n = int(row["n"])
        by_status[row["status"]] = by_status.get(row["status"], 0) + n
        if row["error_type"]:
            by_error[row["error_type"]] = by_error.get(row["error_type"], 0) + n
    return ExecutionBreakdown(
        total=sum(by_status.values()), by_status=by_status, by_error_type=by_error
    )
