"""The fast search paths on real Postgres give the same answers as the reference ones."""

from __future__ import annotations

import random

import numpy as np
import pytest

from shared.db import connect
from shared.graph.metrics import adamic_adar, build_graph, out_neighbours, undirected_projection
from shared.search.graph_signals import NEXT_TOOLS, context_graph_scores
from shared.search.hybrid import hybrid_tool_search
from shared.search.lexical import FIELD_WEIGHTS, WORD_INDEXES, lexical_tool_search
from tests.integration.discovery.helpers import DIM, insert_tool

KINDS = ("sequence", "co_used", "contains", "calls")


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def test_graph_scores_match_networkx(pg_url: str) -> None:
    rnd = random.Random(3)
    nodes = [f"s{i % 4}:t{i}" for i in range(40)] + ["cap:c1"]
    rows = []
    for src in nodes:
        for dst in rnd.sample(nodes, 4):
            # Self loops and non-positive weights are stored but are not graph edges.
            weight = rnd.choice([0.0, 0.5, 1.0, 2.0, 3.5])
            rows.append((src, dst, rnd.choice(KINDS), weight))
    context = [nodes[1], nodes[7], nodes[1]]
    candidates = nodes[::3]
    with connect(pg_url) as conn:
        conn.cursor().executemany(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) VALUES (%s, %s, %s, %s, 1) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        stored = conn.execute("SELECT src, dst, kind, weight FROM tool_edges").fetchall()
        got = context_graph_scores(conn, context_tools=context, candidates=candidates)
    graph = build_graph(stored)
    last = nodes[7]  # the last distinct context tool
    following = out_neighbours(graph, node=last, limit=NEXT_TOOLS)
    top = max(w for _, w in following)
    pool = [
        c
        for c in dict.fromkeys([*candidates, *(t for t, _ in following)])
        if c not in context and not c.startswith("cap:")
    ]
    expected = {
        t: s
        for t, s in adamic_adar(
            undirected_projection(graph), context=context, candidates=pool
        ).items()
        if s > 0
    }
    for tool, weight in following:
        if tool not in context and not tool.startswith("cap:"):
            expected[tool] = expected.get(tool, 0.0) + weight / top
    assert expected  # the random graph does connect the context to candidates
    assert got.score == pytest.approx(expected)
    assert all(f"often follows {last}" in got.reasons[t] for t, _ in following if t in got.score)


def test_lexical_score_weighs_the_field_holding_the_word(pg_url: str) -> None:
    WORD_INDEXES.clear()
    with connect(pg_url) as conn:
        insert_tool(conn, tool_id="misc:zebra_tool", description="Something", embedding=None)
        insert_tool(conn, tool_id="zebra:other", description="Something else", embedding=None)
        insert_tool(conn, tool_id="misc:third", description="Mentions a zebra", embedding=None)
        for i in range(20):  # so "zebra" is rare enough to count
            insert_tool(conn, tool_id=f"misc:filler{i}", description="Unrelated", embedding=None)
        hits = lexical_tool_search(conn, query="zebra", limit=10)
    scores = {h.id: h.score for h in hits}
    assert list(scores) == ["misc:zebra_tool", "zebra:other", "misc:third"]
    name, server, description = (scores[t] for t in scores)
    assert server / name == pytest.approx(FIELD_WEIGHTS["B"] / FIELD_WEIGHTS["A"])
    assert description / name == pytest.approx(FIELD_WEIGHTS["C"] / FIELD_WEIGHTS["A"])
    assert all(h.words == ["zebra"] for h in hits)


@pytest.mark.parametrize("autocommit", [False, True])
def test_more_candidates_than_the_hnsw_default_in_any_transaction_mode(
    pg_url: str, autocommit: bool
) -> None:
    # pgvector's HNSW returns at most ef_search (default 40) rows: the search raises it
    # for its own statements, with or without a caller's transaction.
    rng = np.random.default_rng(5)
    WORD_INDEXES.clear()
    with connect(pg_url) as conn:
        for i in range(70):
            insert_tool(conn, tool_id=f"s:t{i}", description="plain", embedding=_unit(rng))
    with connect(pg_url, autocommit=autocommit) as conn:
        hits = hybrid_tool_search(
            conn,
            query="zzqx",
            query_embedding=[float(x) for x in _unit(rng)],
            clause_embeddings=[[float(x) for x in _unit(rng)]],
            limit=55,
        )
        setting = conn.execute("SHOW hnsw.ef_search").fetchone()
    assert len(hits) == 55
    assert all(h["scores"]["semantic"] is not None for h in hits)
    if autocommit:  # the raised setting did not leak out of the search's own transaction
        assert setting is not None and setting["hnsw.ef_search"] == "40"


def test_lexical_search_sees_synced_and_removed_tools_at_once(pg_url: str) -> None:
    # The words are cached per process; a tool change moves search_state's version.
    WORD_INDEXES.clear()
    with connect(pg_url) as conn:
        for i in range(10):
            insert_tool(conn, tool_id=f"misc:filler{i}", description="Unrelated", embedding=None)
        assert lexical_tool_search(conn, query="quokka", limit=5) == []
        insert_tool(conn, tool_id="zoo:find_quokka", description="Finds one", embedding=None)
        assert [h.id for h in lexical_tool_search(conn, query="quokka", limit=5)] == [
            "zoo:find_quokka"
        ]
        conn.execute("UPDATE tools SET description = 'Finds a wombat' WHERE id = 'misc:filler0'")
        conn.commit()
        assert [h.id for h in lexical_tool_search(conn, query="wombat", limit=5)] == [
            "misc:filler0"
        ]
        conn.execute("DELETE FROM tools WHERE id = 'zoo:find_quokka'")
        conn.commit()
        assert lexical_tool_search(conn, query="quokka", limit=5) == []


def test_pagerank_updates_keep_the_cached_words(pg_url: str) -> None:
    with connect(pg_url) as conn:
        insert_tool(conn, tool_id="zoo:find_quokka", description="Finds one", embedding=None)
        before = conn.execute("SELECT tools_version FROM search_state").fetchone()
        conn.execute("UPDATE tools SET pagerank = 0.5, available = false")
        conn.commit()
        after = conn.execute("SELECT tools_version FROM search_state").fetchone()
    assert before == after


def test_search_ranks_by_pageranks_a_refresh_just_wrote(pg_url: str) -> None:
    # PageRanks are cached per process too; the refresh's UPDATE moves their version,
    # not the words' (so the words are not reloaded for it).
    with connect(pg_url) as conn:
        for i in range(10):
            insert_tool(conn, tool_id=f"misc:filler{i}", description="Unrelated", embedding=None)
        insert_tool(conn, tool_id="zoo:a_quokka", description="Finds a quokka", embedding=None)
        insert_tool(conn, tool_id="zoo:b_quokka", description="Finds a quokka", embedding=None)
    with connect(pg_url, autocommit=True) as conn:

        def ranked() -> list[tuple[str, float]]:
            hits = hybrid_tool_search(conn, query="quokka", query_embedding=[0.0] * DIM, limit=2)
            return [(h["id"], h["scores"]["pagerank"]) for h in hits]

        assert ranked() == [("zoo:a_quokka", 0.0), ("zoo:b_quokka", 0.0)]  # a tie, by id
        words = conn.execute("SELECT tools_version FROM search_state").fetchone()
        conn.execute("UPDATE tools SET pagerank = 0.25 WHERE id = 'zoo:b_quokka'")
        assert ranked() == [("zoo:b_quokka", 0.25), ("zoo:a_quokka", 0.0)]
        conn.execute("UPDATE tools SET pagerank = 0 WHERE id = 'zoo:b_quokka'")
        assert ranked() == [("zoo:a_quokka", 0.0), ("zoo:b_quokka", 0.0)]
        assert conn.execute("SELECT tools_version FROM search_state").fetchone() == words


def test_graph_hits_are_only_tools_that_still_exist(pg_url: str) -> None:
    # Edges outlive the tools of a removed server; the graph must not bring them back.
    with connect(pg_url) as conn:
        insert_tool(conn, tool_id="fs:read", description="Reads a file", embedding=None)
        insert_tool(conn, tool_id="fs:write", description="Writes a file", embedding=None)
        for dst in ("fs:write", "gone:upload", "cap:00000000-0000-0000-0000-000000000001"):
            conn.execute(
                "INSERT INTO tool_edges (src, dst, kind, weight, count) "
                "VALUES ('fs:read', %s, 'sequence', 3, 3)",
                (dst,),
            )
        conn.commit()
    with connect(pg_url, autocommit=True) as conn:
        hits = hybrid_tool_search(
            conn, query="zzqx", query_embedding=[0.0] * DIM, limit=5, context_tools=["fs:read"]
        )
    assert [h["id"] for h in hits] == ["fs:write"]
    assert "often follows fs:read" in hits[0]["why"]
