"""REST for capabilities: search by intent (adaptive threshold), list, and execute with checked args."""

from __future__ import annotations

import uuid
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from services.gateway.config import GatewayState
from services.gateway.deps import State
from services.gateway.executions import submit_execution, wait_for_finish
from shared.embeddings import get_embedder
from shared.errors import NotFound, ValidationFailed
from shared.executions.models import TERMINAL, ExecutionRequest, view_from_row
from shared.matching.availability import mark_availability
from shared.matching.capabilities import match_capabilities
from shared.matching.thresholds import DEFAULT_TENANT
from shared.matching.validate_args import validate_args
from shared.suggestions import record_shown, suggest

router = APIRouter(tags=["capabilities"])

Row = dict[str, Any]


class CapabilitySearchRequest(BaseModel):
    """`POST /v1/capabilities/search` and the MCP `search_capabilities` tool (no threshold: adaptive)."""

    model_config = ConfigDict(extra="forbid")

    intent: str = Field(min_length=1, max_length=2000, description="what you want to do")
    include_suggestions: bool = Field(default=False, description="add related suggestions")
    limit: int = Field(default=5, ge=1, le=20)


class CapabilityExecuteRequest(BaseModel):
    """`POST /v1/capabilities/{id}/execute`: arguments checked against the inferred schema."""

    model_config = ConfigDict(extra="forbid")

    args: dict[str, Any] = Field(default_factory=dict)
    wait: bool = Field(default=False, description="block until the execution finishes")
    timeout_s: float | None = Field(default=None, gt=0)


async def search_capabilities(
    state: GatewayState, *, body: CapabilitySearchRequest, tenant_id: str = DEFAULT_TENANT
) -> Row:
    """Match capabilities to the intent; suggestions from the matches' tools when asked."""
    (vector,) = await to_thread.run_sync(get_embedder(state.settings).embed, [body.intent])

    def run() -> Row:
        with state.pool.connection() as conn:
            found = match_capabilities(
                conn, intent_embedding=vector, tenant_id=tenant_id, limit=body.limit
            )
            if body.include_suggestions:
                context = [t for c in found["capabilities"] for t in (c.get("tools_used") or [])]
                suggestions = suggest(conn, context_tools=context, tenant_id=tenant_id)
                matched = {c["id"] for c in found["capabilities"]}
                suggestions = [s for s in suggestions if s["id"] not in matched]
                record_shown(conn, suggestions=suggestions, tenant_id=tenant_id)
                found["suggestions"] = suggestions
            return found

    return await to_thread.run_sync(run)


def load_capability(state: GatewayState, *, ref: str, tenant_id: str = DEFAULT_TENANT) -> Row:
    """A capability by id, else by name; NotFound otherwise."""
    with state.pool.connection() as conn:
        row = None
        if _is_uuid(ref):
            row = conn.execute(
                "SELECT * FROM capabilities WHERE id = %s AND tenant_id = %s", (ref, tenant_id)
            ).fetchone()
        if row is None:
            row = conn.execute(
                "SELECT * FROM capabilities WHERE name = %s AND tenant_id = %s "
                "ORDER BY success_rate DESC, usage_count DESC LIMIT 1",
                (ref, tenant_id),
            ).fetchone()
    if row is None:
        raise NotFound(
            f"no capability with id or name {ref!r}: find one with POST /v1/capabilities/search",
            id=ref,
        )
    return row


async def execute_capability(
    state: GatewayState,
    *,
    ref: str,
    body: CapabilityExecuteRequest,
    tenant_id: str = DEFAULT_TENANT,
) -> Row:
    """Check args against the capability's schema, then run its code as a normal execution."""
    cap = await to_thread.run_sync(lambda: load_capability(state, ref=ref, tenant_id=tenant_id))
    problems = validate_args(schema=cap["parameters_schema"], args=body.args)
    if not problems.ok:
        raise ValidationFailed(
            f"arguments do not fit capability {cap['name']!r}: {problems.message()}",
            capability_id=str(cap["id"]),
            parameters_schema=cap["parameters_schema"],
            **problems.to_dict(),
        )
    request = ExecutionRequest(
        code=cap["code"], intent=cap["intent"], args=body.args, timeout_s=body.timeout_s
    )
    row = await submit_execution(state, request=request, capability_id=str(cap["id"]))
    if body.wait:
        row = await wait_for_finish(
            state, execution_id=str(row["id"]), timeout_s=float(row["timeout_s"])
        )
    return row


@router.post("/v1/capabilities/search", summary="Find proven code for an intent")
async def search(state: State, body: CapabilitySearchRequest) -> Row:
    """Capabilities scored semantic * reliability at or above the adaptive threshold."""
    return await search_capabilities(state, body=body)


@router.post(
    "/v1/capabilities/{capability_ref}/execute",
    summary="Run a capability (by id or name) with arguments checked against its schema",
)
async def execute(
    state: State,
    capability_ref: str,
    body: CapabilityExecuteRequest,
    wait: bool = Query(False),
) -> JSONResponse:
    """202 with the queued execution, or 200 with the finished one when waiting."""
    if wait:
        body = body.model_copy(update={"wait": True})
    row = await execute_capability(state, ref=capability_ref, body=body)
    view = view_from_row(row)
    return JSONResponse(
        view.model_dump(mode="json"), status_code=200 if view.status in TERMINAL else 202
    )


@router.get(
    "/api/capabilities",
    summary="Learned capabilities, most used first; `degraded` when a tool they use is unavailable",
)
def list_capabilities(
    state: State,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
    min_success_rate: float = Query(0.0, ge=0.0, le=1.0),
) -> Row:
    with state.pool.connection() as conn:
        rows = conn.execute(
            """
            SELECT id, name, description, intent, parameters_schema, tools_used, usage_count,
                   success_count, failure_count, success_rate, avg_duration_ms, source,
                   community, pagerank, last_used, created_at
              FROM capabilities
             WHERE tenant_id = %(tenant)s AND success_rate >= %(rate)s
             ORDER BY usage_count DESC, success_rate DESC, id
             LIMIT %(limit)s OFFSET %(offset)s
            """,
            {"tenant": DEFAULT_TENANT, "rate": min_success_rate, "limit": limit, "offset": offset},
        ).fetchall()
        rows = mark_availability(conn, capabilities=rows)
        total_row = conn.execute(
            "SELECT count(*) AS n FROM capabilities WHERE tenant_id = %s AND success_rate >= %s",
            (DEFAULT_TENANT, min_success_rate),
        ).fetchone()
    return {
        "capabilities": [{**r, "id": str(r["id"])} for r in rows],
        "total": int(total_row["n"]) if total_row else 0,
    }


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
