"""Cache hits through the gateway on real Postgres and Redis, with real API keys: tenancy,
allow-lists, the intent level (L3) and write-failure blocking.

Entries are stored here with the stores the workers use (no sandbox needed: a hit never runs
one); a miss is recorded and queued (202), which is what a user sees before a worker runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.auth.grants import read_grant
from shared.cache import entries, store
from shared.cache.runs import invalidate_servers
from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from tests.integration.cache.seed import ARGS, CODE, INTENT, seed_l1, seed_l2

pytestmark = pytest.mark.integration

MakeKey = Callable[..., tuple[str, dict[str, str]]]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """No worker runs here, so a miss stays queued: its waiting POST gives up soon (202)."""
    return settings.model_copy(update={"execution_wait_slack_s": 0.5})


def _execute(client: TestClient, cap: str, headers: dict[str, str]) -> Any:
    return client.post(f"/v1/capabilities/{cap}/execute", params={"wait": "true"},
                       json={"args": ARGS, "timeout_s": 1}, headers=headers)  # fmt: skip


def _run(client: TestClient, headers: dict[str, str], **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/executions", json={"code": CODE, "args": ARGS, **extra},
                           headers=headers)  # fmt: skip
    assert response.status_code in (200, 202), response.text
    body: dict[str, Any] = response.json()
    return body


def _hit_count(settings: Settings, entry: int) -> int:
    with connect(settings.database_url or "") as conn:
        row = conn.execute("SELECT hit_count FROM capability_cache WHERE id = %s", (entry,))
        return int(row.fetchone()["hit_count"])  # type: ignore[index]


def test_tenant_b_never_gets_tenant_a_cached_results(
    settings: Settings, client: TestClient, make_key: MakeKey
) -> None:
    _, a = make_key("tenant-a")
    _, b = make_key("tenant-b")
    cap_a, _ = seed_l2(settings, tenant="tenant-a", tools=[])
    cap_b, _ = seed_l2(settings, tenant="tenant-b", tools=[])
    seed_l1(settings, tenant="tenant-a", tools=[])
    # Capability level: a's entry is a's; b cannot reach a's capability, and its own
    # capability with the same code and arguments has b's entry, not a's.
    hit = _execute(client, cap_a, a).json()
    assert hit["cache_hit"] == "capability" and hit["result"] == "secret of tenant-a"
    assert _execute(client, cap_a, b).status_code == 404
    own = _execute(client, cap_b, b).json()
    assert own["cache_hit"] == "capability" and own["result"] == "secret of tenant-b"
    # Execution level: the same code and arguments hit for a, miss for b.
    assert _run(client, a)["result"] == "secret of tenant-a"
    miss = _run(client, b)
    assert miss["cache_hit"] is None and miss["status"] == "queued" and miss["result"] is None
    # b's hit and its audit row are b's.
    with connect(settings.database_url or "") as conn:
        rows = conn.execute(
            "SELECT e.tenant_id, a.tenant_id AS audited FROM executions e "
            "JOIN audit_log a ON a.execution_id = e.id WHERE e.id = %s", (own["id"],)
        ).fetchall()  # fmt: skip
    assert rows == [{"tenant_id": "tenant-b", "audited": "tenant-b"}]


def test_a_hit_refused_by_the_allow_list_is_a_miss_and_not_counted(
    settings: Settings, client: TestClient, make_key: MakeKey
) -> None:
    _, wide = make_key("t")
    _, narrow = make_key("t", tool_patterns=["other:*"])
    cap, entry = seed_l2(settings, tenant="t", tools=["files:read_text_file"])
    refused = _execute(client, cap, narrow)
    assert refused.status_code in (200, 202) and refused.json()["cache_hit"] is None
    assert _hit_count(settings, entry) == 0
    assert _execute(client, cap, wide).json()["cache_hit"] == "capability"
    assert _hit_count(settings, entry) == 1
    stats = client.get("/v1/cache/stats", headers=wide).json()["levels"]["capability"]
    assert (stats["hits"], stats["misses"]) == (1, 1)


def test_blocked_or_invalidated_servers_are_never_served(
    settings: Settings, client: TestClient, make_key: MakeKey
) -> None:
    _, key = make_key("t")
    cap, _ = seed_l2(settings, tenant="t", tools=["files:read_text_file"])
    assert _execute(client, cap, key).json()["cache_hit"] == "capability"
    with connect(settings.database_url or "") as conn:  # an invalidation of files failed
        store.block_servers(conn, servers=["files"], reason="test")
        conn.commit()
    assert _execute(client, cap, key).json()["cache_hit"] is None
    client_redis = redis.Redis.from_url(settings.redis_url or "")
    with connect(settings.database_url or "") as conn:  # the beat's retry completes it
        assert invalidate_servers(conn, client_redis, servers=["files"]) == 1
        assert store.blocked_servers(conn) == []
    cap, _ = seed_l2(settings, tenant="t", tools=["files:read_text_file"], name="-again")
    assert _execute(client, cap, key).json()["cache_hit"] is None  # stored at generation 0
    entries.bump_generations(client_redis, ["files"], whole=["files"])  # rows not yet deleted
    assert _execute(client, cap, key).json()["cache_hit"] is None


@pytest.mark.parametrize("enabled", [True, False])
def test_the_intent_cache_answers_a_near_identical_intent_only_when_on(
    settings: Settings, make_key: MakeKey, enabled: bool
) -> None:
    on = settings.model_copy(update={"intent_cache": enabled})
    (vector,) = get_embedder(on).embed([INTENT])
    cap, _ = seed_l2(on, tenant="t", tools=[], embedding=vector)
    _, key = make_key("t")
    with TestClient(create_app(on), client=("127.0.0.1", 50000)) as client:
        # The model is uncased: similarity 1.0. A trailing '.' is 0.92: under 0.95, a miss.
        body = _run(client, key, code="return 'other code'", intent="Report the computed answer")
        far = _run(client, key, code="return 'far code'", intent=INTENT + ".")
        other_args = _run(client, key, code="return 1", args={"n": 2}, intent=INTENT)
    assert far["cache_hit"] is None and far["status"] == "queued"
    assert other_args["cache_hit"] is None
    if enabled:
        assert body["cache_hit"] == "intent" and body["result"] == "secret of t"
        assert body["status"] == "succeeded"
        with connect(on.database_url or "") as conn:
            row = conn.execute("SELECT capability_id FROM executions WHERE id = %s", (body["id"],))
            assert str(row.fetchone()["capability_id"]) == cap  # type: ignore[index]
    else:
        assert body["cache_hit"] is None and body["status"] == "queued"


def test_a_new_run_is_counted_and_granted_and_a_repeat_of_its_key_counted_too(
    settings: Settings, client: TestClient, make_key: MakeKey
) -> None:
    """A new run's lookup counters travel with its grant (one round trip): both land; a
    repeated idempotency key (no new run, no grant) still has its lookup counted."""
    _, headers = make_key("t-counted")
    first = _run(client, headers, idempotency_key="once", timeout_s=1)
    again = _run(client, headers, idempotency_key="once", timeout_s=1)
    assert again["id"] == first["id"] and first["status"] == "queued"
    client_redis = redis.Redis.from_url(settings.redis_url or "")
    assert read_grant(client_redis, execution_id=first["id"]) is not None  # a worker may run it
    stats = client.get("/v1/cache/stats", headers=headers).json()["levels"]["execution"]
    assert (stats["hits"], stats["misses"]) == (0, 2)
