"""A started gateway loads the search's model and caches before its first search comes."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings
from shared.db import connect
from shared.search.lexical import WORD_INDEXES
from shared.search.pageranks import PAGERANKS


def _wait_for_warm_up(timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while any(t.name == "search-warm-up" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the warm-up never ended"
        time.sleep(0.05)


def test_the_first_search_finds_everything_loaded(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _wait_for_warm_up()  # of gateways that other tests started
    WORD_INDEXES.clear()
    PAGERANKS.clear()
    caplog.set_level(logging.WARNING)
    with TestClient(create_app(settings)) as client:
        _wait_for_warm_up()
        with connect(settings.database_url or "") as conn:
            words = conn.execute("SELECT tools_version FROM search_state").fetchone()
            ranks = conn.execute("SELECT version FROM pagerank_state").fetchone()
            assert words is not None and ranks is not None
            # Cached under the versions a search reads now: nothing left to load.
            assert WORD_INDEXES.current(conn, version=words["tools_version"])
            assert PAGERANKS.current(conn, version=ranks["version"])
        response = client.post("/v1/tools/search", json={"query": "read a file", "limit": 3})
        assert response.status_code == 200, response.text
    assert "warm-up stopped" not in caplog.text
