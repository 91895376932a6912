"""The gateway's side of the result cache: answer a submission from L2 (capabilities) or L1,
then L3 (intents, when on), recording the hit as a succeeded execution (stats and clearing:
cache_admin.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import redis

from services.gateway.state import GatewayState
from shared.auth.patterns import cached_patterns
from shared.auth.principal import Principal
from shared.cache import entries, store
from shared.cache.hits import record_capability_hit, record_hit
from shared.cache.keys import execution_digest, params_hash
from shared.cache.policy import servers_of
from shared.cache.runs import Scope, load_scope
from shared.cache.stats import Level, record_lookup
from shared.embeddings import get_embedder
from shared.executions.models import ExecutionRequest

Row = dict[str, Any]

# L3: how close (cosine) an intent must be to a cached capability's to take its result.
INTENT_MIN_SIMILARITY = 0.95


@dataclass(slots=True)
class Generations:
    """The generations of a scope's servers as the L1 lookup read them, on the entry's round
    trip (``entries.get_entry_and_generations``); None until then (no L1 lookup was made)."""

    read: dict[str, int] | None = None


def answer_from_cache(
    state: GatewayState,
    conn: Any,
    *,
    request: ExecutionRequest,
    principal: Principal,
    timeout_s: float,
    capability_id: str | None,
    counters: redis.client.Pipeline,
    scope: Scope | None = None,
    cleared: Callable[[str], bool] | None = None,
    generations: Generations | None = None,
) -> Row | None:
    """The recorded, audited hit for this submission, or None (a miss: run it); each lookup
    is counted on ``counters``, which the caller sends.

    An entry whose run used a tool outside the caller's allow-list is a miss (and is not
    counted as a hit), so a restricted key never reads what only a wider key's run could
    produce; so is one whose servers were invalidated or blocked since it was stored.
    ``scope``: the request's scope (``load_scope``) when the caller read it already;
    ``cleared``: whether the policy in force lets a cached call of a tool stand for this
    caller's (``policy.cache_clearance``; an entry with a tool it does not clear is a miss).
    ``generations``: filled with the generations of the scope's servers, read with the L1
    entry (one round trip for both; the run's ``cache_runs.prepare`` then reads none).
    """
    tenant_id = principal.tenant_id
    allowed = principal.tool_patterns
    listed = (lambda _tool: True) if allowed is None else cached_patterns(allowed).allows
    permitted = listed if cleared is None else (lambda tool: listed(tool) and cleared(tool))

    def usable(
        tools: list[str], servers: list[str], stored: dict[str, Any], now: dict[str, int] | None
    ) -> bool:
        """``now``: generations read with the entry (else read here, after it)."""
        if not all(map(permitted, tools)):
            return False
        if now is not None and all(entries.WRITE + s in now for s in servers):
            return entries.current_as_read(now, servers=servers, generations=stored)
        return entries.current(state.redis, servers=servers, generations=stored)

    def record(level: Level, found: Found | None) -> Row | None:
        row = None
        if found is not None:
            row = record_hit(
                conn, request=request, timeout_s=timeout_s, tenant_id=tenant_id,
                key_id=principal.key_id, user_id=principal.user,
                capability_id=found.capability_id,
                entry_id=found.entry_id, servers=found.servers, result=found.result,
                stdout=found.stdout, extras={"cache_hit": str(level),
                "cached_at": found.cached_at, "source_execution_id": found.source},
            )  # fmt: skip
            conn.commit()
        record_lookup(counters, tenant_id=tenant_id, level=level, hit=row is not None)
        return row

    if capability_id is not None:
        # Found, counted and recorded in one statement, then checked: a refusal rolls it all
        # back (no hit counted, no execution), so a hit costs one statement and one commit.
        recorded = record_capability_hit(
            conn, request=request, timeout_s=timeout_s, tenant_id=tenant_id,
            key_id=principal.key_id, user_id=principal.user, capability_id=capability_id,
            params_hash=params_hash(request.args), level=str(Level.CAPABILITY),
        )  # fmt: skip
        row = None
        if recorded is not None:
            row, entry = recorded
            if usable(entry["tools_used"], entry["servers"], entry["generations"], None):
                conn.commit()
            else:
                conn.rollback()
                row = None
        record_lookup(counters, tenant_id=tenant_id, level=Level.CAPABILITY, hit=row is not None)
        return row
    scope = scope or load_scope(conn, tools=request.tools)
    digest = lookup_digest(request, scope)
    if generations is None:
        hit = entries.get_entry(state.redis, tenant_id=tenant_id, digest=digest)
    else:
        hit, generations.read = entries.get_entry_and_generations(
            state.redis, tenant_id=tenant_id, digest=digest,
            servers=sorted(servers_of(scope.policies)),
        )  # fmt: skip
    if hit is not None and not usable(
        hit.tools_used,
        sorted(servers_of(hit.tools_used)),
        hit.generations,
        generations.read if generations is not None else None,
    ):
        hit = None
    found = None
    if hit is not None:
        found = Found(
            capability_id=hit.capability_id, entry_id=None,
            servers=sorted(servers_of(hit.tools_used)), result=hit.result, stdout=hit.stdout,
            cached_at=datetime.fromtimestamp(hit.cached_at, UTC).isoformat(),
            source=hit.source_execution_id,
        )  # fmt: skip
    row = record(Level.EXECUTION, found)
    if row is not None or not (state.settings.intent_cache and request.intent):
        return row
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
        and usable(near["tools_used"], near["servers"], near["generations"], None)
    ):
        near = None
    return record(Level.INTENT, _from_row(near, str(near["capability_id"])) if near else None)


def lookup_digest(request: ExecutionRequest, scope: Scope) -> str:
    """The L1 key's digest of a submission in ``scope`` (its code, arguments and language)."""
    return execution_digest(
        code=request.code, args=request.args, scope=scope.digest, language=request.language
    )


@dataclass(frozen=True, slots=True)
class Found:
    """A usable entry of any level, before its hit is recorded."""

    capability_id: str | None
    entry_id: int | None  # the L2 row (L2 and L3 hits), counted when the hit is recorded
    servers: list[str]
    result: Any
    stdout: str
    cached_at: str
    source: str


def _from_row(row: Row, capability_id: str) -> Found:
    return Found(
        capability_id=capability_id, entry_id=int(row["id"]), servers=list(row["servers"]),
        result=row["result"], stdout=row["stdout"], cached_at=row["created_at"].isoformat(),
        source=str(row["source_execution_id"]),
    )  # fmt: skip
