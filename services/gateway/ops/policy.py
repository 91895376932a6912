"""The gateway's policy decision on a submission: may this caller run code in this language,
or this capability? (Each tool call inside the run is decided again by the toolhost.)"""

from __future__ import annotations

import logging
from typing import Any

import redis

from services.gateway.state import GatewayState
from shared import metrics
from shared.auth.principal import Principal
from shared.errors import PolicyDenied
from shared.policy.callers import caller_of_principal
from shared.policy.facts import Action, Surface, plain_entity

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
    try:
        metrics.incr_labelled(state.redis, "policy_decisions_total", decision.label)
    except redis.RedisError:  # a lost count never costs the decision
        log.warning("policy decision not counted", exc_info=True)
    if decision.allowed:
        return
    what = "running code" if capability is None else f"running capability {capability!r}"
    log.warning(
        "policy denied %s for tenant %s: %s", what, principal.tenant_id, decision.reason,
        extra={"event": "policy_denied", "policies": list(decision.policies)},
    )  # fmt: skip
    raise PolicyDenied(
        f"{what} ({language}) is denied by policy ({decision.reason}); an operator permits it "
        f'with a policy on action AgentCards::Action::"{action}" (docs/policy.md)',
        policies=list(decision.policies),
    )
