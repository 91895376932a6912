"""Managing the result cache (REST): a tenant's stats, one capability's cache facts, and
manual invalidation, audited."""

from __future__ import annotations

from typing import Any

from services.gateway.ops.capabilities import load_capability
from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.audit import AuditAction, record_audit
from shared.auth.principal import Principal
from shared.cache import entries, store
from shared.cache.invalidate import Trigger, invalidate
from shared.cache.runs import capability_policy
from shared.cache.stats import Level, tenant_stats
from shared.db import DictConnection

Row = dict[str, Any]


async def cache_stats(state: GatewayState, *, tenant_id: str) -> Row:
    """Entries, hits, misses and hit rate per level, and invalidations by trigger."""

    def read(conn: DictConnection) -> Row:
        levels = tenant_stats(state.redis, tenant_id=tenant_id)
        levels[Level.CAPABILITY]["entries"] = store.entry_count(conn, tenant_id=tenant_id)
        invalidations = store.invalidations_by_trigger(conn, tenant_id=tenant_id)
        levels[Level.EXECUTION]["entries"] = entries.count_entries(state.redis, tenant_id=tenant_id)
        levels[Level.INTENT]["entries"] = None  # L3 reads L2's entries
        return {"levels": levels, "invalidations": invalidations}

    return await in_pool(state, read)


async def capability_cache_facts(state: GatewayState, *, tenant_id: str, ref: str) -> Row:
    """One capability (by id or name): how often the cache answered its runs, its live entries,
    and whether (and for how long) its next successful run would be cached."""

    def read(conn: DictConnection) -> Row:
        cap = load_capability(state, ref=ref, tenant_id=tenant_id, conn=conn)
        facts = store.capability_facts(conn, tenant_id=tenant_id, capability_id=str(cap["id"]))
        policy = capability_policy(
            conn,
            tools_used=cap.get("tools_used") or [],
            config=cap.get("cache_config"),
            default_ttl_s=state.settings.capability_cache_ttl_s,
            read_only_ttl_s=state.settings.cache_read_only_ttl_s,
        )
        runs, hits = int(facts["runs"]), int(facts["hits"])
        expiry = facts["next_expiry"]
        return {
            "capability_id": str(cap["id"]),
            "runs": runs,
            "hits": hits,
            "hit_rate": round(hits / runs, 4) if runs else None,
            "cacheable": policy.cacheable,
            "reason": policy.reason,
            "ttl_s": policy.ttl_s if policy.cacheable else 0,
            "entries": int(facts["entries"]),
            "entry_hits": int(facts["entry_hits"]),
            "next_expiry": expiry.isoformat() if expiry else None,
        }

    return await in_pool(state, read)


async def clear_cache(state: GatewayState, *, principal: Principal, server: str | None) -> Row:
    """Drop the tenant's entries (or those that used ``server``): how many, and the scope."""
    scope = f"server:{server}" if server else "tenant"
    count = await in_pool(
        state,
        lambda conn: _clear(state, conn, principal=principal, scope=scope, server=server),
    )
    return {"invalidated": count, "scope": scope}


async def clear_capability_cache(state: GatewayState, *, principal: Principal, ref: str) -> Row:
    """Drop one capability's entries (by id or name; NotFound for an unknown one)."""

    def clear(conn: DictConnection) -> Row:
        cap = load_capability(state, ref=ref, tenant_id=principal.tenant_id, conn=conn)
        scope = f"capability:{cap['id']}"
        count = _clear(state, conn, principal=principal, scope=scope, capability_id=str(cap["id"]))
        return {"invalidated": count, "scope": scope}

    return await in_pool(state, clear)


def _clear(
    state: GatewayState,
    conn: DictConnection,
    *,
    principal: Principal,
    scope: str,
    capability_id: str | None = None,
    server: str | None = None,
) -> int:
    """Manual invalidation of the tenant's entries in ``scope``, audited as a cache clear."""
    tenant_id = principal.tenant_id
    count = invalidate(
        conn, state.redis, trigger=Trigger.MANUAL, scope=scope, tenant_id=tenant_id,
        capability_id=capability_id, servers=[server] if server else [],
    )  # fmt: skip
    record_audit(
        conn, tenant_id=tenant_id, key_id=principal.key_id, user_id=principal.user,
        action=AuditAction.CACHE_CLEAR,
        details={"scope": scope, "invalidated": count},
    )  # fmt: skip
    conn.commit()
    return count
