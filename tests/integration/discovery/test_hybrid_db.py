"""Hybrid tool search on real Postgres: lexical exactness, graph context, empty graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg

from shared.db import connect
from shared.search.hybrid import hybrid_tool_search
from shared.search.lexical import WORD_INDEXES
from tests.integration.discovery.helpers import DIM, insert_edge, insert_tool

FILLER = [
    ("files:read_file", "Read the complete contents of a file from disk"),
    ("files:write_file", "Create a new file or overwrite an existing one"),
    ("web:fetch", "Fetch a URL from the internet and return its content"),
    ("notes:list_notes", "List every note in the notebook"),
    ("mail:send", "Send an e-mail message"),
    ("maps:geocode", "Turn an address into coordinates"),
]


def _random_vector(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _catalogue(pg_url: str) -> np.random.Generator:
    rng = np.random.default_rng(7)
    WORD_INDEXES.clear()
    with connect(pg_url) as conn:
        for tool_id, description in FILLER:
            insert_tool(
                conn, tool_id=tool_id, description=description, embedding=_random_vector(rng)
            )
        insert_tool(
            conn,
            tool_id="weather:getWeatherForecast",
            description="Daily outlook for a location",
            embedding=_random_vector(rng),
        )
    return rng


def _after_reading_a_file(
    conn: psycopg.Connection[Any], *, query: str, vector: list[float], limit: int
) -> list[dict[str, Any]]:
    """A search made right after files:read_file was used (the graph signal takes part)."""
    return hybrid_tool_search(
        conn, query=query, query_embedding=vector, limit=limit, context_tools=["files:read_file"]
    )


def test_lexically_exact_tool_ranks_first(pg_url: str) -> None:
    rng = _catalogue(pg_url)
    with connect(pg_url) as conn:
        hits = hybrid_tool_search(
            conn,
            query="weather forecast for tomorrow",
            query_embedding=[float(x) for x in _random_vector(rng)],
            limit=5,
        )
    assert hits[0]["id"] == "weather:getWeatherForecast"  # camelCase name split for FTS
    top = hits[0]
    assert top["scores"]["lexical"] > 0
    assert top["scores"]["graph"] == 0.0  # empty graph: no failure, no graph signal
    assert "weather" in top["why"] and "forecast" in top["why"]
    assert {
        "id",
        "server",
        "name",
        "description",
        "input_schema",
        "available",
        "score",
    } <= top.keys()
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_no_text_match_still_ranks_by_embedding(pg_url: str) -> None:
    rng = _catalogue(pg_url)
    with connect(pg_url) as conn:
        row = conn.execute("SELECT embedding FROM tools WHERE id = 'mail:send'").fetchone()
        assert row is not None
        hits = hybrid_tool_search(
            conn,
            query="zzqx",
            query_embedding=[float(x) for x in row["embedding"].to_numpy()],
            limit=3,
        )
    assert hits[0]["id"] == "mail:send"
    assert hits[0]["scores"]["semantic"] > 0.99 and hits[0]["scores"]["lexical"] == 0.0
    del rng


def test_context_tools_bring_in_what_usually_follows(pg_url: str) -> None:
    rng = _catalogue(pg_url)
    with connect(pg_url) as conn:
        insert_edge(conn, src="files:read_file", dst="notes:list_notes", weight=3.0)
        insert_edge(conn, src="files:read_file", dst="files:write_file", weight=1.0)
        query = [float(x) for x in _random_vector(rng)]
        plain = hybrid_tool_search(conn, query="zzqx", query_embedding=query, limit=3)
        guided = _after_reading_a_file(conn, query="zzqx", vector=query, limit=3)
    assert guided[0]["id"] == "notes:list_notes"
    assert guided[0]["scores"]["graph"] > 0
    assert "often follows files:read_file" in guided[0]["why"]
    assert plain[0]["id"] != "notes:list_notes" or plain[0]["scores"]["graph"] == 0.0
    assert "files:read_file" not in [h["id"] for h in guided if h["scores"]["graph"] > 0]


def test_unavailable_tools_are_never_offered(pg_url: str) -> None:
    _catalogue(pg_url)
    best = "weather:getWeatherForecast"
    with connect(pg_url) as conn:
        insert_edge(conn, src="files:read_file", dst=best, weight=3.0)
        row = conn.execute("SELECT embedding FROM tools WHERE id = %s", (best,)).fetchone()
        assert row is not None
        query = [float(x) for x in row["embedding"].to_list()]

        def search() -> list[str]:
            hits = _after_reading_a_file(conn, query="weather forecast", vector=query, limit=5)
            assert all(h["available"] for h in hits)
            return [h["id"] for h in hits]

        assert search()[0] == best  # first by every signal: words, embedding, graph
        with conn.transaction():  # its server went down or left the configuration
            conn.execute("UPDATE tools SET available = false WHERE server = 'weather'")
        found = search()
    assert best not in found
    assert len(found) == 5  # the others still fill the page
