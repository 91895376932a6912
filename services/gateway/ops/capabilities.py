"""Capabilities as the gateway serves them (REST and MCP): search by intent, load, run, list."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from anyio import to_thread

from services.gateway.ops.admission import Admission, admit
from services.gateway.ops.db import in_pool
from services.gateway.ops.enqueue import enqueue_admitted
from services.gateway.ops.models.capabilities import (
    CapabilityExecuteRequest,
    CapabilitySearchRequest,
    CapabilitySearchResponse,
)
from services.gateway.ops.policy import refuse_by_policy
from services.gateway.ops.wait import wait_for_finish
from services.gateway.state import GatewayState
from shared import metrics
from shared.auth.audit import AuditAction, record_audit
from shared.auth.patterns import allowed_scope
from shared.auth.principal import Principal
from shared.capabilities import store
from shared.db import DictConnection
from shared.embeddings import get_embedder
from shared.errors import CapabilityDisabled, NotFound, ToolNotAllowed, ValidationFailed
from shared.executions.models import ExecutionRequest
from shared.executions.status import TERMINAL
from shared.matching.capabilities import match_capabilities
from shared.suggestions import record_shown, suggest
from shared.tools.arguments import validate_args

Row = dict[str, Any]

# When no capability reaches the threshold, at most this many of the closest are shown.
BELOW_THRESHOLD_CANDIDATES = 3


async def search_capabilities(
    state: GatewayState, *, body: CapabilitySearchRequest, principal: Principal
) -> CapabilitySearchResponse:
    """Match the tenant's capabilities to the intent; suggestions from the matches' tools when asked."""
    (vector,) = await to_thread.run_sync(get_embedder(state.settings).embed, [body.intent])
    tenant_id = principal.tenant_id

    def run(conn: DictConnection) -> Row:  # one connection: audit row, matches, suggestions
        record_audit(
            conn,
            tenant_id=tenant_id,
            key_id=principal.key_id,
            user_id=principal.user,
            action=AuditAction.SEARCH,
            args=body.model_dump(mode="json"),
            details={"kind": "capabilities"},
        )
        found = match_capabilities(
            conn,
            intent_embedding=vector,
            tenant_id=tenant_id,
            limit=body.limit,
            tool_patterns=principal.tool_patterns,
            include_out_of_scope=body.include_out_of_scope,
            candidates=min(body.limit, BELOW_THRESHOLD_CANDIDATES),
            language=body.language,
        )
        if body.include_suggestions:
            context = [t for c in found["capabilities"] for t in (c.get("tools_used") or [])]
            suggestions = suggest(
                conn,
                context_tools=context,
                tenant_id=tenant_id,
                tool_patterns=None if body.include_out_of_scope else principal.tool_patterns,
            )
            matched = {c["id"] for c in found["capabilities"]}
            suggestions = [s for s in suggestions if s["id"] not in matched]
            shown = record_shown(conn, suggestions=suggestions, tenant_id=tenant_id)
            metrics.incr(state.redis, "suggestions_generated_total", shown)
            found["suggestions"] = suggestions
        metrics.count_search(state.redis, matched=bool(found["capabilities"]))
        return found

    return CapabilitySearchResponse.model_validate(await in_pool(state, run))


def load_capability(state: GatewayState, *, ref: str, tenant_id: str, conn: Any = None) -> Row:
    """A capability by id, else by name (on ``conn`` when given); NotFound otherwise."""
    if "\x00" in ref:  # Postgres text cannot hold NUL: refuse before querying
        raise ValidationFailed(
            "a capability id or name must not contain a NUL character", field="capability_id"
        )
    with nullcontext(conn) if conn is not None else state.pool.connection() as conn:
        row = store.get_capability(conn, ref=ref, tenant_id=tenant_id)
    if row is None:
        raise NotFound(
            f"no capability with id or name {ref!r}: find one with search_capabilities "
            "(MCP) or POST /v1/capabilities/search",
            id=ref,
        )
    return row


async def capability_names(
    state: GatewayState, *, tenant_id: str, prefix: str, limit: int
) -> tuple[list[str], int]:
    """The tenant's capability names starting with ``prefix`` (at most ``limit``) and how many
    there are; none for a prefix Postgres cannot hold."""
    if "\x00" in prefix:
        return [], 0
    return await in_pool(
        state,
        lambda conn: store.names_starting(conn, tenant_id=tenant_id, prefix=prefix, limit=limit),
    )


async def execute_capability(
    state: GatewayState,
    *,
    ref: str,
    body: CapabilityExecuteRequest,
    principal: Principal,
) -> Row:
    """Check args against the capability's schema, then run its code as the caller's execution.

    It runs under the caller's tool allow-list, not its author's: a capability is code, not a grant.
    """
    admission = await admit_capability(state, ref=ref, body=body, principal=principal)
    row = await enqueue_admitted(state, admission=admission, principal=principal)
    if body.wait and row["status"] not in TERMINAL:
        row = await wait_for_finish(
            state, execution_id=str(row["id"]), timeout_s=float(row["timeout_s"]), submitted=row
        )
    return row


def out_of_scope_tools(tools_used: list[str] | None, principal: Principal) -> list[str]:
    """The tools a capability used that the caller's allow-list does not let it call."""
    _, refused = allowed_scope(list(tools_used or []), principal.tool_patterns)
    return refused


def refuse_disabled(cap: Row) -> None:
    """CapabilityDisabled (409 ``capability_disabled``) before anything starts."""
    if cap.get("disabled_at") is not None:
        raise CapabilityDisabled(
            f"capability {cap['name']!r} is disabled by an operator: enable it "
            f'(PATCH /v1/capabilities/{cap["id"]} with {{"disabled": false}}, or '
            f"`agentcards capabilities enable {cap['id']}`) or find another with "
            "search_capabilities",
            capability_id=str(cap["id"]),
        )


def refuse_out_of_scope(cap: Row, principal: Principal) -> None:
    """ToolNotAllowed (as execute_code gives) before anything starts, when the capability
    calls a tool outside the caller's allow-list: its run could only fail on that call."""
    refused = out_of_scope_tools(cap.get("tools_used"), principal)
    if refused:
        raise ToolNotAllowed(
            f"capability {cap['name']!r} calls tools not allowed for this API key: "
            f"{', '.join(refused[:20])}; it may call {', '.join(principal.tool_patterns or ())}",
            tools=refused,
            capability_id=str(cap["id"]),
        )


async def admit_capability(
    state: GatewayState, *, ref: str, body: CapabilityExecuteRequest, principal: Principal
) -> Admission:
    """The capability's run, checked and recorded (or a cache hit), not yet enqueued."""

    def admitted(conn: DictConnection) -> Admission:
        cap = load_capability(state, ref=ref, tenant_id=principal.tenant_id, conn=conn)
        refuse_disabled(cap)
        refuse_out_of_scope(cap, principal)
        refuse_by_policy(
            state,
            principal=principal,
            language=cap.get("language") or "python",
            capability=cap["name"],
            args=body.args,
        )
        problems = validate_args(schema=cap["parameters_schema"], args=body.args)
        if not problems.ok:
            raise ValidationFailed(
                f"arguments do not fit capability {cap['name']!r}: {problems.message()}",
                capability_id=str(cap["id"]),
                parameters_schema=cap["parameters_schema"],
                **problems.to_dict(),
            )
        request = ExecutionRequest(
            code=cap["code"],
            language=cap.get("language") or "python",  # either runtime: the capability's own
            intent=cap["intent"],
            args=body.args,
            timeout_s=body.timeout_s,
            no_cache=body.no_cache,
            retry=body.retry,
            learn=body.learn,
        )
        return admit(
            state, request=request, principal=principal, capability_id=str(cap["id"]), conn=conn
        )

    # One thread hop and one connection: a cache hit needs no other.
    return await in_pool(state, admitted)
