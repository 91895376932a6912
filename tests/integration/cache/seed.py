"""Cached results stored the way the workers store them, for tests that need no sandbox run."""

from __future__ import annotations

from typing import Any

import redis

from shared.cache import entries, store
from shared.cache.keys import execution_digest, params_hash
from shared.cache.runs import load_scope
from shared.config import Settings
from shared.db import connect
from tests.integration.discovery.helpers import basis, insert_capability

CODE = "return 'computed'"
ARGS = {"n": 1}
INTENT = "report the computed answer"


def seed_l2(
    settings: Settings, *, tenant: str, tools: list[str], embedding: Any = None, name: str = ""
) -> tuple[str, int]:
    """A capability of ``tenant`` (code CODE) and its cached result for ARGS: (id, entry id)."""
    with connect(settings.database_url or "") as conn:
        cap = insert_capability(
            conn, name=f"cached-{tenant}{name}", tenant_id=tenant,
            embedding=basis(0) if embedding is None else embedding,
            schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        )  # fmt: skip
        conn.execute("UPDATE capabilities SET code = %s, intent = %s WHERE id = %s",
                     (CODE, INTENT, cap))  # fmt: skip
        entry = store.put_entry(
            conn, tenant_id=tenant, capability_id=cap, params_hash=params_hash(ARGS),
            result=f"secret of {tenant}", stdout="", tools_used=tools,
            servers=sorted({t.split(":")[0] for t in tools}), source_execution_id=None,
            ttl_s=600, generations={},
        )  # fmt: skip
        conn.commit()
    assert entry is not None
    return cap, entry


def seed_l1(settings: Settings, *, tenant: str, tools: list[str]) -> None:
    with connect(settings.database_url or "") as conn:
        scope = load_scope(conn, tools=None)
    entries.put_entry(
        redis.Redis.from_url(settings.redis_url or ""), tenant_id=tenant,
        digest=execution_digest(code=CODE, args=ARGS, scope=scope.digest),
        entry=entries.CachedResult(result=f"secret of {tenant}", stdout="", tools_used=tools,
                                   cached_at=entries.now(), source_execution_id="e"),
        ttl_s=600, servers=sorted({t.split(":")[0] for t in tools}), generations={},
    )  # fmt: skip
