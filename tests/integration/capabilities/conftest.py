"""A gateway app over real Postgres and Redis with API keys: one tenant per key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.gateway.app import create_app
from shared.auth.store import issue_key
from shared.config import Settings, get_settings
from shared.db import connect

Headers = dict[str, str]


@pytest.fixture
def keys(settings: Settings) -> Callable[[str], Headers]:
    """Issue a key for a tenant; the Authorization header carrying it."""

    def make(tenant: str) -> Headers:
        with connect(settings.database_url or "") as conn:
            _, key = issue_key(conn, tenant_id=tenant)
            conn.commit()
        return {"Authorization": f"Bearer {key}"}

    return make


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client


def sql(settings: Settings, query: str, params: Any = ()) -> list[dict[str, Any]]:
    """Run one statement on the test database, committed; its rows (if any)."""
    with connect(settings.database_url or "") as conn:
        cur = conn.execute(query, params)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
    return [dict(r) for r in rows]


@pytest.fixture
def cli(stack: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """A CLI runner whose `agentcards` calls reach the test module's ``stack`` gateway."""
    monkeypatch.setenv("AGENTCARDS_HOME", str(tmp_path / "no-stack-here"))
    monkeypatch.setenv("AGENTCARDS_GATEWAY_HOST", "127.0.0.1")
    monkeypatch.setenv("AGENTCARDS_GATEWAY_PORT", str(stack.settings.gateway_port))
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()
