"""Hybrid search over five published servers' real tools (MiniLM) with a usage graph among
filesystem and git tools: a prior must not lift a tool the request does not speak of, and
``why`` names every signal that moved a hit."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from shared.search.graph_snapshot import GRAPH_SNAPSHOTS
from shared.search.hybrid import embed_texts_for_query, hybrid_tool_search
from shared.search.lexical import WORD_INDEXES
from shared.search.pageranks import PAGERANKS
from shared.tools.store import search_text
from tests.integration.discovery.helpers import insert_edge

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[3] / "deploy" / "bench" / "data" / "real_servers"
# A workspace where files are read, edited and committed all day: co-use edges and the
# PageRank they give, among filesystem and git tools only.
WORKFLOW = [
    "filesystem:read_text_file",
    "filesystem:edit_file",
    "git:git_diff_unstaged",
    "git:git_add",
    "git:git_commit",
    "git:git_status",
    "filesystem:read_text_file",
    "filesystem:write_file",
    "git:git_add",
]
PAGERANK = {
    "filesystem:read_text_file": 0.2,
    "git:git_add": 0.16,
    "git:git_commit": 0.14,
    "filesystem:edit_file": 0.1,
    "git:git_status": 0.1,
    "filesystem:write_file": 0.08,
    "git:git_diff_unstaged": 0.06,
    "filesystem:list_directory": 0.04,
}
CONTEXT = ["filesystem:read_text_file", "git:git_add"]


def _tools() -> list[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    listed = json.loads((DATA / "tools.json").read_text())["tools"]
    return [
        (server, t["name"], t["description"], t["inputSchema"] or {}, t["annotations"])
        for server, entries in listed.items()
        for t in entries
    ]


@pytest.fixture
def searcher(pg_url: str) -> Any:
    """search(query) → hits: the five servers' tools embedded and annotated as the toolhost
    stores them, a usage graph."""
    settings = Settings(database_url=pg_url, redis_url="redis://unused", env="test")
    embedder = get_embedder(settings)
    tools = _tools()
    vectors = embedder.embed(
        [search_text(server=s, name=n, description=d) for s, n, d, _, _ in tools]
    )
    for cache in (WORD_INDEXES, PAGERANKS, GRAPH_SNAPSHOTS):
        cache.clear()
    with connect(pg_url) as conn:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tools (id, server, name, description, input_schema, schema_hash, "
                "embedding, pagerank, annotations) VALUES (%s, %s, %s, %s, %s, '', %s, %s, %s)",
                [
                    (
                        f"{server}:{name}",
                        server,
                        name,
                        description,
                        Jsonb(schema),
                        np.asarray(v, dtype=np.float32),
                        PAGERANK.get(f"{server}:{name}", 0.0),
                        Jsonb(annotations),
                    )
                    for (server, name, description, schema, annotations), v in zip(
                        tools, vectors, strict=True
                    )
                ],
            )
        conn.commit()
        for src, dst in itertools.pairwise(WORKFLOW):
            insert_edge(conn, src=src, dst=dst, weight=3.0)

    def search(query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        vecs = embedder.embed_query(embed_texts_for_query(query))
        with connect(pg_url) as conn:
            return hybrid_tool_search(
                conn,
                query=query,
                query_embedding=vecs[0],
                clause_embeddings=vecs[1:],
                limit=limit,
                context_tools=CONTEXT,
            )

    return search


def _show(hits: list[dict[str, Any]]) -> str:
    return "\n".join(f"{h['id']} {h['score']:.3f} {h['scores']} | {h['why']}" for h in hits)


def test_remembering_a_fact_finds_the_memory_tools(searcher: Any) -> None:
    # server-everything's generic tools ("Toggles simulated resource subscription updates")
    # used to come first: the memory server's tools say "knowledge graph", not "remember".
    hits = searcher("remember that Alice works at Acme")
    ids = [h["id"] for h in hits]
    print(_show(hits))
    assert ids[0] in {"memory:create_entities", "memory:add_observations"}, _show(hits)
    assert not any(i.startswith("everything:") for i in ids[:2]), _show(hits)


@pytest.mark.parametrize(
    "request_text",
    [
        "note that Alice is allergic to nuts",
        "store that Carol likes jazz",
        "log the fact that Dave moved to Berlin",
        "save: Bob is Carol's manager",
        "don't forget that Eve prefers email",
    ],
)
def test_storing_a_fact_however_asked_finds_a_memory_write_tool(
    searcher: Any, request_text: str
) -> None:
    # The names and facts outweigh "note"/"store"/"log" in one embedding of the request
    # (every tool 0.10-0.20): server-everything, git_log or get-sum came first. The
    # request's frame ("note", "store", "log the fact") is searched beside it.
    hits = searcher(request_text)
    print(_show(hits))
    writes = {"memory:create_entities", "memory:add_observations", "memory:create_relations"}
    assert writes & {h["id"] for h in hits[:3]}, _show(hits)


def test_time_in_a_city_is_the_current_time(searcher: Any) -> None:
    hits = searcher("what time is it in Tokyo")
    print(_show(hits))
    ids = [h["id"] for h in hits]
    assert ids.index("time:get_current_time") < ids.index("time:convert_time"), _show(hits)


def test_why_names_every_signal_with_its_amount(searcher: Any) -> None:
    for query in ("remember that Alice works at Acme", "commit the edited file"):
        for hit in searcher(query):
            amounts = [float(x) for x in re.findall(r"\(([+-]\d+\.\d+)\)", hit["why"])]
            # The listed contributions add up to the score: nothing lifted a hit unexplained.
            assert sum(amounts) == pytest.approx(hit["score"], abs=0.001 * len(amounts)), hit
            if hit["scores"]["support"] == 0:  # no support: no prior took part
                assert "usage graph" not in hit["why"], hit
