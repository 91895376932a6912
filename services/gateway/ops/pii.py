"""Resolving tokens to their values, for an admin key of the token's tenant only, audited
(docs/privacy.md): the one path that returns a value to a caller."""

from __future__ import annotations

from typing import Any

from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.audit import AuditAction, record_audit
from shared.auth.principal import Principal
from shared.errors import Forbidden
from shared.privacy.keys import PiiKeys
from shared.privacy.vault import resolve_tokens


async def resolve(
    state: GatewayState, *, principal: Principal, tokens: list[str]
) -> dict[str, Any]:
    """``{"values": {token: value}, "unresolved": [token…]}`` for the caller's tenant; the
    audit row (tokens and how many resolved, never values) commits with the read."""
    if not principal.admin:
        raise Forbidden(
            "resolving tokens needs an admin key of this tenant "
            "(`agentcards keys create --tenant <tenant> --admin`)"
        )
    keys = PiiKeys.from_settings(state.settings)
    wanted = list(dict.fromkeys(tokens))

    def run(conn: Any) -> dict[str, str]:
        values = resolve_tokens(conn, tenant_id=principal.tenant_id, tokens=wanted, keys=keys)
        record_audit(
            conn,
            tenant_id=principal.tenant_id,
            key_id=principal.key_id,
            user_id=principal.user,
            action=AuditAction.PII_RESOLVE,
            args=wanted,
            details={"tokens": wanted, "resolved": len(values)},
        )
        return values

    values = await in_pool(state, run)
    return {"values": values, "unresolved": [t for t in wanted if t not in values]}
