"""A server dropped from the MCP config takes its cached results with it: real toolhost (the
example server configured, `gone` not), real Postgres and Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from shared.cache import entries
from shared.cache.keys import execution_digest
from shared.cache.runs import load_scope
from shared.config import Settings
from shared.db import connect
from tests.integration.cache.seed import ARGS, CODE, seed_l1, seed_l2
from tests.integration.mcp_servers import ToolhostProcess, example_server, write_config
from tests.stack import wait_until

pytestmark = pytest.mark.integration


def test_a_server_removed_from_the_config_loses_its_cached_results(
    settings: Settings, tmp_path: Path, toolhost: Callable[..., ToolhostProcess]
) -> None:
    with connect(settings.database_url or "") as conn:
        conn.execute(
            "INSERT INTO mcp_servers (name, transport, state) VALUES ('gone', 'stdio', 'ready')"
        )
        conn.commit()
    cap, _ = seed_l2(settings, tenant="t", tools=["gone:read"])
    seed_l1(settings, tenant="t", tools=["gone:read"])
    kept, _ = seed_l2(settings, tenant="t", tools=["example:add"], name="-kept")

    # Servers that left the config are handled before any server connects: no need to wait.
    config = write_config(tmp_path / "servers.json", {"example": example_server(tmp_path)})
    toolhost(config, wait=False)
    wait_until(lambda: _logged(settings), what="the removed server's invalidation")

    with connect(settings.database_url or "") as conn:
        left = conn.execute(
            "SELECT capability_id FROM capability_cache ORDER BY capability_id"
        ).fetchall()
        logged = conn.execute(
            'SELECT tenant_id, trigger, scope, "count" FROM cache_invalidation_log'
        ).fetchall()
        scope = load_scope(conn, tools=None)
    assert [str(r["capability_id"]) for r in left] == [kept] and cap != kept
    assert logged == [
        {"tenant_id": "t", "trigger": "server_removed", "scope": "server:gone", "count": 2}
    ]
    client = redis.Redis.from_url(settings.redis_url or "")
    digest = execution_digest(code=CODE, args=ARGS, scope=scope.digest)
    assert entries.get_entry(client, tenant_id="t", digest=digest) is None
    assert client.keys("*gone*") != []  # the generation of `gone` was bumped


def _logged(settings: Settings) -> bool:
    with connect(settings.database_url or "") as conn:
        return conn.execute("SELECT 1 FROM cache_invalidation_log").fetchone() is not None
