"""The product's session Postgres (``tests/conftest.py``), for the experiments' smoke tests."""

from __future__ import annotations

import pytest

from deploy.launcher.embedded import EmbeddedPostgres
from tests.conftest import embedded_pg

__all__ = ["embedded_pg"]


@pytest.fixture
def bench_server(embedded_pg: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch) -> None:
    # The benches create (and drop) their own database on this server.
    monkeypatch.setenv("AGENTCARDS_DATABASE_URL", embedded_pg.url)
