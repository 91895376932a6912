"""The caller a decision is about, from what the gateway knows (a principal) or wrote (a grant)."""

from __future__ import annotations

from shared.auth.grants import Grant
from shared.auth.principal import Principal
from shared.policy.facts import Caller


def caller_of_grant(grant: Grant) -> Caller:
    """The caller an execution's grant records (the toolhost's view of a call)."""
    return Caller(
        tenant=grant.tenant_id,
        key_id=grant.key_id,
        key_name=grant.key_name,
        user=grant.user,
        groups=grant.groups,
        email=grant.email,
    )


def caller_of_principal(principal: Principal) -> Caller:
    """The caller a request runs as (the gateway's view of a submission)."""
    return Caller(
        tenant=principal.tenant_id,
        key_id=principal.key_id,
        key_name=principal.key_name,
        user=principal.user,
        groups=principal.groups,
        email=principal.email,
    )
