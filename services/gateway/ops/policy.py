"""The gateway's policy decisions: on a submission (may this caller run code in this language,
or this capability? each tool call inside the run is decided again by the toolhost), and on
a direct client's prompt request (``get_prompt``: the toolhost does not know its caller)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
import redis
from anyio import to_thread

from services.gateway.state import GatewayState
from shared import metrics
from shared.auth.audit import AuditAction, record_audit
from shared.auth.principal import Principal
from shared.errors import ErrorType, PolicyDenied
from shared.policy.callers import caller_of_principal
from shared.policy.facts import Action, Surface, plain_entity, prompt_entity, tool_entity
from shared.tools.store import run_tools_at, tools_version

log = logging.getLogger(__name__)


def refuse_by_policy(
    state: GatewayState,
    *,
    principal: Principal,
    language: str,
    capability: str | None = None,
    args: dict[str, Any] | None = None,
) -> None:
    """PolicyDenied (403 ``policy_denied``, the deciding policies in ``policies``) when the
    policy file does not permit this submission; nothing when it does or none is configured.
    Blocking (one counter round trip)."""
    if not state.policy.configured:
        return
    if capability is None:
        action, resource = Action.EXECUTE_CODE, plain_entity("Language", language)
    else:
        action, resource = Action.EXECUTE_CAPABILITY, plain_entity("Capability", capability)
    surface = Surface.CODE if capability is None else Surface.CAPABILITY
    decision = state.policy.decide(
        action=action,
        caller=caller_of_principal(principal),
        resource=resource,
        context={"surface": str(surface), "tenant": principal.tenant_id, "language": language},
        args=args,
    )
    if decision is None:
        return
    _count(state, decision.label)
    if decision.allowed:
        return
    what = "running code" if capability is None else f"running capability {capability!r}"
    _audit_refusal(state, principal, decision.policies, decision.reason, language, capability, args)
    log.warning(
        "policy denied %s for tenant %s: %s", what, principal.tenant_id, decision.reason,
        extra={"event": "policy_denied", "policies": list(decision.policies)},
    )  # fmt: skip
    raise PolicyDenied(
        f"{what} ({language}) is denied by policy ({decision.reason}); an operator permits it "
        f'with a policy on action AgentCards::Action::"{action}" (docs/policy.md)',
        policies=list(decision.policies),
    )


async def refuse_prompt(
    state: GatewayState,
    *,
    principal: Principal,
    server: str,
    name: str,
    arguments: dict[str, Any] | None,
) -> None:
    """PolicyDenied when the policy file does not permit ``principal`` to get the prompt
    ``server:name`` with these arguments (action ``get_prompt``; a prompt is requested on
    the direct surface, outside any run: ``execution_id`` is empty)."""
    if not state.policy.configured:
        return
    decision = state.policy.decide(
        action=Action.GET_PROMPT,
        caller=caller_of_principal(principal),
        resource=prompt_entity(f"{server}:{name}", server),
        context={"surface": str(Surface.DIRECT), "tenant": principal.tenant_id, "execution_id": ""},
        args=arguments,
    )
    if decision is None:
        return
    await to_thread.run_sync(_count, state, decision.label)
    if decision.allowed:  # an @approval on a prompt's permit: nothing runs, nothing to wait for
        return
    log.warning(
        "policy denied prompt %s:%s for tenant %s: %s", server, name, principal.tenant_id,
        decision.reason, extra={"event": "policy_denied", "policies": list(decision.policies)},
    )  # fmt: skip
    raise PolicyDenied(
        f"prompt {server}:{name}: denied by policy ({decision.reason})",
        policies=list(decision.policies),
    )


def cache_clearance(
    state: GatewayState, conn: Any, *, principal: Principal, surface: Surface, language: str
) -> Callable[[str], bool]:
    """Whether a cached result's call of a tool stands for a call this caller would make now
    (docs/policy.md): the policy in force permits the tool to them on this surface without
    a person's approval, and no policy that can apply reads what only one call has (its
    arguments, its execution): then no call of it would be refused or paused now. Blocking
    (the tools' annotations, read at its first use: only a lookup that found an entry)."""
    loaded = state.policy.current()
    if loaded is None:
        return lambda _tool: True
    rows: dict[str, Any] = {}
    caller = caller_of_principal(principal)
    context: dict[str, Any] = {"surface": str(surface), "tenant": principal.tenant_id,
                               "execution_id": ""}  # fmt: skip
    if surface != Surface.DIRECT:
        context["language"] = language

    def clears(tool_id: str) -> bool:
        if not rows:
            rows.update((r["id"], r) for r in run_tools_at(conn, version=tools_version(conn)))
        row = rows.get(tool_id)
        resource = tool_entity(tool_id, row["annotations"] if row is not None else None)
        if loaded.index.reads_the_call(str(Action.CALL_TOOL), resource["uid"]):
            return False
        decision = state.policy.decide(
            action=Action.CALL_TOOL, caller=caller, resource=resource, context=context
        )
        return decision is not None and decision.allowed and decision.approval is None

    return clears


def _count(state: GatewayState, label: str) -> None:
    try:
        metrics.incr_labelled(state.redis, "policy_decisions_total", label)
    except redis.RedisError:  # a lost count never costs the decision
        log.warning("policy decision not counted", exc_info=True)


def _audit_refusal(
    state: GatewayState,
    principal: Principal,
    policies: tuple[str, ...],
    reason: str,
    language: str,
    capability: str | None,
    args: dict[str, Any] | None,
) -> None:
    """A refused submission to the audit log (``submission_refused``: who, what, which
    policies; the arguments as a hash). A lost row is logged; the refusal stands."""
    details: dict[str, Any] = {
        "type": str(ErrorType.POLICY_DENIED),
        "policies": list(policies),
        "reason": reason,
        "language": language,
    }
    if capability is not None:
        details["capability"] = capability
    try:
        with state.pool.connection() as conn:
            record_audit(
                conn,
                tenant_id=principal.tenant_id,
                key_id=principal.key_id,
                user_id=principal.user,
                action=AuditAction.SUBMISSION_REFUSED,
                args=args or {},
                details=details,
            )
    except psycopg.Error:
        log.exception("could not audit the refused submission")
