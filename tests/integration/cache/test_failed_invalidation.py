"""A write's invalidation that cannot complete, on real stores: with Redis down the server is
blocked in the real Postgres and the gateway (real keys) serves none of its entries until the
beat's retry completes; with Postgres down too, the invalidation raises, so the worker stores
the run as failed, never as a success whose write could be read back stale. Connections come
from a real pool, as in the worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from deploy.launcher.embedded import free_port
from shared.cache import store
from shared.cache.runs import invalidate_servers, invalidate_servers_safely
from shared.config import Settings
from shared.db import connect, make_pool
from shared.errors import CacheInvalidationFailed
from tests.integration.cache.seed import ARGS, seed_l2

pytestmark = pytest.mark.integration

MakeKey = Callable[..., tuple[str, dict[str, str]]]
NO_DELAYS = (0.0, 0.0)  # two retries, at once: the stores stay down either way


def _down_redis() -> redis.Redis:
    """A client of a port nobody listens on: every command fails like an outage."""
    return redis.Redis(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2)


@contextmanager
def _pool(url: str) -> Iterator[Any]:
    pool = make_pool(url, max_size=1, timeout=1.0)
    try:
        yield pool
    finally:
        pool.close()


def _hit(client: TestClient, cap: str, headers: dict[str, str]) -> Any:
    """How the cache answered a run of ``cap``; not waited for (no worker runs a miss here:
    a wait would last the run's whole timeout)."""
    response = client.post(f"/v1/capabilities/{cap}/execute", json={"args": ARGS},
                           headers=headers)  # fmt: skip
    assert response.status_code in (200, 202), response.text
    return response.json()["cache_hit"]


def _state(settings: Settings, entry: int) -> tuple[list[str], int | None, list[str]]:
    """Blocked servers, the entry's hit count (None once deleted) and the log's triggers."""
    with connect(settings.database_url or "") as conn:
        row = conn.execute("SELECT hit_count FROM capability_cache WHERE id = %s", (entry,))
        found = row.fetchone()
        triggers = conn.execute("SELECT trigger FROM cache_invalidation_log ORDER BY id")
        return (
            store.blocked_servers(conn),
            None if found is None else int(found["hit_count"]),
            [r["trigger"] for r in triggers.fetchall()],
        )


def test_with_redis_down_a_write_blocks_its_server_until_the_retry_completes(
    settings: Settings, client: TestClient, make_key: MakeKey
) -> None:
    _, key = make_key("t")
    cap, entry = seed_l2(settings, tenant="t", tools=["files:read_text_file"])
    assert _hit(client, cap, key) == "capability"

    # Every attempt fails on Redis: nothing is deleted, the server is blocked instead.
    with _pool(settings.database_url or "") as pool:
        blocked = invalidate_servers_safely(
            pool.connection, _down_redis(), servers=["files"], delays_s=NO_DELAYS
        )
    assert blocked == 0
    assert _state(settings, entry) == (["files"], 1, [])
    # The entry is still there, and never served: a miss, not counted as a hit.
    assert _hit(client, cap, key) is None
    assert _state(settings, entry)[:2] == (["files"], 1)

    # The beat's retry, with Redis back: the entry is deleted and logged, the block lifted.
    with connect(settings.database_url or "") as conn:
        live = redis.Redis.from_url(settings.redis_url or "")
        assert invalidate_servers(conn, live, servers=store.blocked_servers(conn)) == 1
        conn.commit()
    assert _state(settings, entry) == ([], None, ["write"])
    assert _hit(client, cap, key) is None


def test_with_redis_and_postgres_down_the_invalidation_fails_loudly() -> None:
    down_pg = f"postgresql://nobody@127.0.0.1:{free_port()}/none?connect_timeout=1"
    with (
        _pool(down_pg) as pool,
        pytest.raises(CacheInvalidationFailed, match="files") as caught,
    ):
        invalidate_servers_safely(
            pool.connection, _down_redis(), servers=["files"], delays_s=NO_DELAYS
        )
    assert caught.value.details == {"servers": ["files"]}
