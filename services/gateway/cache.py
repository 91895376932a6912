"""The gateway's side of the result cache: answer a submission from L2 (capabilities) or L1,
then L3 (intents, when on), recording the hit as a succeeded execution; stats and clearing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.gateway.config import GatewayState
from shared.auth.audit import AuditAction, record_audit
from shared.auth.patterns import cached_patterns
from shared.cache import entries, store
from shared.cache.invalidate import Trigger, invalidate
from shared.cache.keys import execution_digest, params_hash
from shared.cache.runs import load_scope
from shared.cache.stats import Level, record_lookup, tenant_stats
from shared.embeddings import get_embedder
from shared.executions.models import ExecutionRequest
from shared.executions.store import record_cache_hit

Row = dict[str, Any]

# L3: how close (cosine) an intent must be to a cached capability's to take its result.
INTENT_MIN_SIMILARITY = 0.95


def answer_from_cache(
    state: GatewayState,
    *,
    request: ExecutionRequest,
    tenant_id: str,
    timeout_s: float,
    capability_id: str | None,
    allowed: tuple[str, ...] | None = None,
) -> Row | None:
    """The recorded hit for this submission, or None (a miss: run it).

    ``allowed`` is the caller's tool allow-list: an entry whose run used a tool outside it is
    a miss, so a restricted key never reads what only a wider key's run could produce.
    """
    permitted = (lambda _tool: True) if allowed is None else cached_patterns(allowed).allows
    with state.pool.connection() as conn:
        if capability_id is not None:
            entry = store.take_entry(
                conn,
                tenant_id=tenant_id,
                capability_id=capability_id,
                params_hash=params_hash(request.args),
            )
            if entry is not None and not all(map(permitted, entry["tools_used"] or [])):
                entry = None
            record_lookup(state.redis, tenant_id=tenant_id, level=Level.CAPABILITY, hit=bool(entry))
            if entry is None:
                return None
            return _record(conn, request, tenant_id, timeout_s, capability_id, Level.CAPABILITY,
                           result=entry["result"], stdout=entry["stdout"],
                           cached_at=entry["created_at"].isoformat(),
                           source=str(entry["source_execution_id"]))  # fmt: skip
        scope = load_scope(conn, tools=request.tools)
        digest = execution_digest(code=request.code, args=request.args, scope=scope.digest)
        hit = entries.get_entry(state.redis, tenant_id=tenant_id, digest=digest)
        if hit is not None and not all(map(permitted, hit.tools_used)):
            hit = None
        record_lookup(state.redis, tenant_id=tenant_id, level=Level.EXECUTION, hit=bool(hit))
        if hit is not None:
            return _record(conn, request, tenant_id, timeout_s, hit.capability_id, Level.EXECUTION,
                           result=hit.result, stdout=hit.stdout,
                           cached_at=datetime.fromtimestamp(hit.cached_at, UTC).isoformat(),
                           source=hit.source_execution_id)  # fmt: skip
        if not (state.settings.intent_cache and request.intent):
            return None
        (vector,) = get_embedder(state.settings).embed([request.intent])
        near = store.find_by_intent(
            conn,
            tenant_id=tenant_id,
            embedding=np.asarray(vector, dtype=np.float32),
            params_hash=params_hash(request.args),
            min_similarity=INTENT_MIN_SIMILARITY,
        )
        # The cached run may only have used tools this request may call.
        if near is not None and not (
            set(near["tools_used"]) <= set(scope.policies)
            and all(map(permitted, near["tools_used"]))
        ):
            near = None
        record_lookup(state.redis, tenant_id=tenant_id, level=Level.INTENT, hit=bool(near))
        if near is None:
            return None
        return _record(conn, request, tenant_id, timeout_s, str(near["capability_id"]),
                       Level.INTENT, result=near["result"], stdout=near["stdout"],
                       cached_at=near["created_at"].isoformat(),
                       source=str(near["source_execution_id"]))  # fmt: skip


def _record(
    conn: Any,
    request: ExecutionRequest,
    tenant_id: str,
    timeout_s: float,
    capability_id: str | None,
    level: Level,
    *,
    result: Any,
    stdout: str,
    cached_at: str,
    source: str,
) -> Row:
    row, _ = record_cache_hit(
        conn,
        request=request,
        timeout_s=timeout_s,
        tenant_id=tenant_id,
        capability_id=capability_id,
        result=result,
        stdout=stdout,
        extras={"cache_hit": str(level), "cached_at": cached_at, "source_execution_id": source},
    )
    return row


def clear(
    state: GatewayState,
    *,
    tenant_id: str,
    key_id: str | None = None,
    capability_id: str | None = None,
    server: str | None = None,
) -> int:
    """Manual invalidation of the tenant's entries (of one capability, or that used a server),
    audited as a cache clear."""
    scope = (
        f"capability:{capability_id}"
        if capability_id
        else f"server:{server}"
        if server
        else "tenant"
    )
    with state.pool.connection() as conn:
        count = invalidate(
            conn, state.redis, trigger=Trigger.MANUAL, scope=scope, tenant_id=tenant_id,
            capability_id=capability_id, servers=[server] if server else [],
        )  # fmt: skip
        record_audit(
            conn, tenant_id=tenant_id, key_id=key_id, action=AuditAction.CACHE_CLEAR,
            details={"scope": scope, "invalidated": count},
        )  # fmt: skip
        conn.commit()
        return count


def stats(state: GatewayState, *, tenant_id: str) -> Row:
    """Entries, hits, misses and hit rate per level, and invalidations by trigger."""
    levels = tenant_stats(state.redis, tenant_id=tenant_id)
    with state.pool.connection() as conn:
        levels[Level.CAPABILITY]["entries"] = store.entry_count(conn, tenant_id=tenant_id)
        invalidations = store.invalidations_by_trigger(conn, tenant_id=tenant_id)
    levels[Level.EXECUTION]["entries"] = entries.count_entries(state.redis, tenant_id=tenant_id)
    levels[Level.INTENT]["entries"] = None  # L3 reads L2's entries
    return {"levels": levels, "invalidations": invalidations}
