"""A gateway app on this test's real Postgres and Redis, and API keys issued the way the CLI does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.auth.store import issue_key
from shared.config import Settings
from shared.db import connect


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client


@pytest.fixture
def make_key(settings: Settings) -> Callable[..., tuple[str, dict[str, str]]]:
    """Issue a key; returns its id and the Authorization header carrying it."""

    def make(tenant: str, **options: Any) -> tuple[str, dict[str, str]]:
        with connect(settings.database_url or "") as conn:
            row, key = issue_key(conn, tenant_id=tenant, **options)
            conn.commit()
        return str(row["id"]), {"Authorization": f"Bearer {key}"}

    return make
