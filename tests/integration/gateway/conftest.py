"""A gateway app bound to this test's real database and Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    # A loopback client, as on the machine that runs the stack (/healthz is open to it).
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as test_client:
        yield test_client
