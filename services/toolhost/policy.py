"""The toolhost's policy decision on each tool call, made after the grant's checks and before
the call leaves for its server (so the arguments a script computed are the ones decided on).

Every call of a sandbox run (Python or TypeScript, a capability's code included) and every
direct call reaches a toolhost over the RPC channel, so this one place decides them all.
"""

from __future__ import annotations

import logging
from typing import Any

from services.toolhost.registry import ToolRegistry
from shared import metrics
from shared.auth.grants import Grant
from shared.policy.callers import caller_of_grant
from shared.policy.engine import Decision, PolicyEngine
from shared.policy.facts import Action, resource_entity, tool_entity
from shared.rpc.protocol import ResourceRequest, RpcRequest
from shared.rpc.wire import Command

log = logging.getLogger(__name__)


def decide_call(
    engine: PolicyEngine, registry: ToolRegistry, request: RpcRequest, grant: Grant
) -> Decision | None:
    """The policy decision on ``request`` (None: no policy file configured)."""
    if not engine.configured:
        return None
    decision = engine.decide(
        action=Action.CALL_TOOL,
        caller=caller_of_grant(grant),
        resource=tool_entity(request.tool, _annotations(registry, request.tool)),
        context=_context(grant, request.execution_id),
        args=request.args,
    )
    _log_denial(decision, request.execution_id, request.tool)
    return decision


def decide_read(engine: PolicyEngine, request: ResourceRequest, grant: Grant) -> Decision | None:
    """The policy decision on an execution's read of one resource (None: no policy file)."""
    if not engine.configured or request.uri is None or request.server is None:
        return None
    decision = engine.decide(
        action=Action.READ_RESOURCE,
        caller=caller_of_grant(grant),
        resource=resource_entity(request.uri, request.server),
        context=_context(grant, request.execution_id),
    )
    _log_denial(decision, request.execution_id, request.uri)
    return decision


def _context(grant: Grant, execution_id: str) -> dict[str, Any]:
    context: dict[str, Any] = {
        "surface": grant.surface,
        "tenant": grant.tenant_id,
        "execution_id": execution_id,
    }
    if grant.language is not None:
        context["language"] = grant.language
    return context


def _log_denial(decision: Decision | None, execution_id: str, what: str) -> None:
    if decision is not None and not decision.allowed:
        log.warning(
            "policy denied %s for execution %s: %s", what, execution_id, decision.reason,
            extra={"event": "policy_denied", "execution_id": execution_id, "target": what,
                   "policies": list(decision.policies)},
        )  # fmt: skip


def decision_commands(decision: Decision | None) -> list[Command]:
    """The decision counted (``agentcards_policy_decisions_total{decision}``), as commands
    sent after the reply on its round trip."""
    if decision is None:
        return []
    return [metrics.labelled_incr_command("policy_decisions_total", decision.label)]


def _annotations(registry: ToolRegistry, tool_id: str) -> dict[str, Any] | None:
    """The tool's MCP annotations as its server listed them (None: unknown here)."""
    server, _, name = tool_id.partition(":")
    backend = registry.get(server)
    spec = (getattr(backend, "tools", None) or {}).get(name)
    hints = getattr(spec, "annotations", None)
    if hints is None:
        return None
    return dict(hints.model_dump(by_alias=True, exclude_none=True))
