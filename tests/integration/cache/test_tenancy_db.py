"""Tenancy of the cache stores on real Postgres and Redis: an entry is its tenant's only."""

from __future__ import annotations

import redis

from shared.cache import entries, store
from shared.cache.invalidate import Trigger, invalidate
from shared.db import connect


def _capability(conn: object, tenant: str) -> str:
    row = conn.execute(  # type: ignore[attr-defined]
        "INSERT INTO capabilities (tenant_id, code_hash, code, intent, name) "
        "VALUES (%s, 'h', 'return 1', 'one', 'one') RETURNING id",
        (tenant,),
    ).fetchone()
    return str(row["id"])


def test_two_tenants_never_share_entries(pg_url: str, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    result = entries.CachedResult(result=1, stdout="", tools_used=["s:t"], cached_at=0.0,
                                  source_execution_id="e")  # fmt: skip
    assert entries.put_entry(client, tenant_id="a", digest="d", entry=result, ttl_s=60,
                             servers=["s"], generations={})  # fmt: skip
    assert entries.get_entry(client, tenant_id="a", digest="d") == result
    assert entries.get_entry(client, tenant_id="b", digest="d") is None
    with connect(pg_url) as conn:
        cap = _capability(conn, "a")
        put = {"capability_id": cap, "params_hash": "p", "result": 1, "stdout": "",
               "tools_used": ["s:t"], "servers": ["s"], "source_execution_id": None,
               "ttl_s": 60, "generations": {}}  # fmt: skip
        assert store.put_entry(conn, tenant_id="a", **put) is not None
        assert store.put_entry(conn, tenant_id="b", **put) is None  # not b's capability
        assert store.find_entry(conn, tenant_id="b", capability_id=cap, params_hash="p") is None
        assert store.find_entry(conn, tenant_id="a", capability_id=cap, params_hash="p")
        # b clearing its cache leaves a's entries alone.
        assert invalidate(conn, client, trigger=Trigger.MANUAL, scope="tenant", tenant_id="b") == 0
        assert store.find_entry(conn, tenant_id="a", capability_id=cap, params_hash="p")
        assert entries.get_entry(client, tenant_id="a", digest="d") == result


def test_an_entry_stored_after_a_write_began_is_dropped(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    before = entries.read_generations(client, ["s"])
    entries.bump_generations(client, ["s"])  # a write to s finished while the run read
    result = entries.CachedResult(result=1, stdout="", tools_used=["s:t"], cached_at=0.0,
                                  source_execution_id="e")  # fmt: skip
    kept = entries.put_entry(client, tenant_id="a", digest="d", entry=result, ttl_s=60,
                             servers=["s"], generations=before)  # fmt: skip
    assert not kept and entries.get_entry(client, tenant_id="a", digest="d") is None
