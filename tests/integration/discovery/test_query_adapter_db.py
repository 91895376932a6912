"""The consolidated query adapter on real Postgres, the real model and real ingestion: a
consolidation with enough held-back runs ships an adapter that the tenant's next search
applies (and no other tenant's), after which only newer runs vote; one with too few
held-back runs is kept out."""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.embeddings import Embedder
from shared.learning.consolidate import FORGET_AFTER_DAYS, MIN_HELD_BACK, consolidate
from shared.learning.ingest import ingest_executions
from shared.search.adapter_store import ADAPTERS
from shared.search.hybrid import gather_evidence
from tests.integration.discovery.test_learned_search_db import Conn, conn, embedder, hits, run

__all__ = ["conn", "embedder"]  # fixtures

# How one tenant asks for five tools: its own words, three times each (the third of each
# is the most recent, held back by the consolidation's check).
JARGON = {
    "memory:create_entities": [
        "jot down that Alice is our Acme contact",
        "jot down that Bob is the Paris supplier",
        "jot down that Carol runs the tea shop",
    ],
    "time:get_current_time": [
        "what does the clock say in Tokyo",
        "what does the clock say in Lima",
        "what does the clock say in Oslo",
    ],
    "filesystem:write_file": [
        "stash these lines into notes.txt",
        "stash this draft into plan.md",
        "stash the summary into report.txt",
    ],
    "filesystem:read_text_file": [
        "peek at config.yaml",
        "peek at the README",
        "peek at todo.txt",
    ],
    "git:git_commit": [
        "seal my work in the repo",
        "seal today's changes in the repo",
        "seal the fix in the repo",
    ],
}
QUERY = "jot down that Dave is the new accountant"


def dense(
    conn: Conn, embedder: Embedder, query: str, *, tenant: str, adapted: bool = True
) -> dict[str, float]:
    vector = embedder.embed_query([query])[0]
    return gather_evidence(
        conn, query=query, query_embedding=vector, tenant_id=tenant, adapted=adapted
    ).dense


def intents(conn: Conn, embedder: Embedder, query: str, *, tenant: str) -> int:
    """How many past intents the search read for ``query`` (the vote's evidence)."""
    vector = embedder.embed_query([query])[0]
    return len(gather_evidence(conn, query=query, query_embedding=vector, tenant_id=tenant).intents)


def adapters(conn: Conn, tenant: str) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT version, trained_on, held_back, score_before, score_after, shipped, "
        "matrix IS NOT NULL AS kept FROM query_adapters WHERE tenant_id = %s ORDER BY version",
        (tenant,),
    ).fetchall()


def test_a_shipped_adapter_moves_its_tenants_search_only(conn: Conn, embedder: Embedder) -> None:
    ADAPTERS.clear()
    raw = dense(conn, embedder, QUERY, tenant="acme", adapted=False)
    for i in range(2):
        for tool, phrasings in JARGON.items():
            run(conn, embedder, intent=phrasings[i], calls=[(tool, True)], tenant="acme")
    # Five tools run twice: the ingestion of the tenth run fitted the adapter, checked it on
    # each tool's newest run and shipped it, before any pass. The next search maps the
    # query: the tool the tenant uses for "jot down" comes closer than the raw query put it.
    assert [
        (r["version"], r["trained_on"], r["held_back"], r["shipped"])
        for r in adapters(conn, "acme")
    ] == [(1, 5, 5, True)]
    at_once = dense(conn, embedder, QUERY, tenant="acme")
    assert at_once["memory:create_entities"] > raw["memory:create_entities"]
    # The third round as one batch: the runs grew by half, so its ingestion refits on all
    # fifteen (each tool's newest held back); the pass then refits the same.
    third = [
        run(conn, embedder, intent=phrasings[2], calls=[(tool, True)], tenant="acme", ingest=False)
        for tool, phrasings in JARGON.items()
    ]
    ingest_executions(conn, execution_ids=third, embedder=embedder)
    conn.commit()
    assert [(r["trained_on"], r["held_back"]) for r in adapters(conn, "acme")][-1] == (10, 5)
    done = consolidate(conn)
    fit = done[0].adapter
    assert fit is not None and fit.shipped
    assert fit.score_after >= fit.score_before
    rows = adapters(conn, "acme")
    assert [(r["version"], r["trained_on"], r["held_back"], r["shipped"]) for r in rows][-1] == (
        3,
        10,
        5,
        True,
    )
    after = dense(conn, embedder, QUERY, tenant="acme")
    assert after["memory:create_entities"] > raw["memory:create_entities"]
    assert next(iter(hits(conn, embedder, QUERY, tenant="acme"))) == "memory:create_entities"
    # Another tenant: the query as embedded, the zero-shot ranking.
    assert dense(conn, embedder, QUERY, tenant="other") == raw
    # The vote counts only what the adapter has not learned: nothing until a new run,
    # which counts at once (immediate learning until the next consolidation).
    assert intents(conn, embedder, QUERY, tenant="acme") == 0
    run(conn, embedder, intent=QUERY, calls=[("memory:create_entities", True)], tenant="acme")
    assert intents(conn, embedder, QUERY, tenant="acme") == 1


def test_too_few_held_back_runs_keep_the_identity(conn: Conn, embedder: Embedder) -> None:
    ADAPTERS.clear()
    tools = list(JARGON)[: MIN_HELD_BACK - 1]
    for i in range(2):
        for tool in tools:
            run(conn, embedder, intent=JARGON[tool][i], calls=[(tool, True)], tenant="small")
    before = dense(conn, embedder, QUERY, tenant="small")
    done = consolidate(conn)
    fit = done[0].adapter
    assert fit is not None and not fit.shipped
    assert [(r["held_back"], r["shipped"], r["kept"]) for r in adapters(conn, "small")] == [
        (len(tools), False, False)
    ]
    assert dense(conn, embedder, QUERY, tenant="small") == before


def test_matrix_round_trips(conn: Conn) -> None:
    # What the consolidation stores is what the search loads (float32, row-major).
    from shared.search.adapter_store import load_adapter, matrix_bytes

    matrix = np.arange(16, dtype=np.float32).reshape(4, 4)
    conn.execute(
        "INSERT INTO query_adapters (tenant_id, version, trained_on, held_back, shipped, "
        "matrix, dim, seconds) VALUES ('t', 1, 0, 0, true, %s, 4, 0)",
        (matrix_bytes(matrix),),
    )
    held = load_adapter(conn, tenant_id="t")
    assert held.version == 1 and held.matrix is not None
    assert np.array_equal(held.matrix, matrix)


def test_a_fit_scoring_worse_held_back_is_not_shipped(conn: Conn, embedder: Embedder) -> None:
    # Version 1 learns the tenant's words. Then runs that name the wrong tool (each tool's
    # phrasings credited to the next tool) outnumber the right ones in training, while
    # each tool's most recent run, the held-back one, is right again: the new fit scores
    # below the adapter in use, which stays in use.
    ADAPTERS.clear()
    tools = list(JARGON)
    for i in range(3):
        for tool in tools:
            run(conn, embedder, intent=JARGON[tool][i], calls=[(tool, True)], tenant="acme")
    assert consolidate(conn)[0].adapter.shipped  # type: ignore[union-attr]
    shipped = dense(conn, embedder, QUERY, tenant="acme")
    # One burst, ingested as one batch: the runs more than doubled, so its ingestion fits
    # the adapter on them, with the pass's check.
    burst = []
    for i in range(3):
        for n, tool in enumerate(tools):
            wrong = tools[(n + 1) % len(tools)]
            for extra in ("", " please", " now"):
                intent = JARGON[tool][i] + extra
                burst.append(
                    run(
                        conn,
                        embedder,
                        intent=intent,
                        calls=[(wrong, True)],
                        tenant="acme",
                        ingest=False,
                    )
                )
    for tool in tools:
        intent = JARGON[tool][0] + " today"
        burst.append(
            run(conn, embedder, intent=intent, calls=[(tool, True)], tenant="acme", ingest=False)
        )
    ingest_executions(conn, execution_ids=burst, embedder=embedder)
    conn.commit()
    fit = consolidate(conn)[0].adapter
    assert fit is not None
    assert fit.score_after < fit.score_before and not fit.shipped
    rows = adapters(conn, "acme")
    # The burst's fit at ingestion and the pass: neither shipped; the version in use keeps
    # the only matrix.
    assert [(r["shipped"], r["kept"]) for r in rows[-2:]] == [(False, False), (False, False)]
    assert [r["shipped"] for r in rows if r["kept"]] == [True]
    # The search keeps the version in use (the vote aside: compare the dense lists).
    assert dense(conn, embedder, QUERY, tenant="acme") == shipped


def test_a_tool_the_tenant_stopped_using_fades(conn: Conn, embedder: Embedder) -> None:
    # Its runs vote less as they age (half a month's worth at 30 days), and once older than
    # FORGET_AFTER_DAYS the consolidation no longer trains on them.
    ADAPTERS.clear()
    tool = "git:git_commit"
    for i in range(3):
        for each, phrasings in JARGON.items():
            run(conn, embedder, intent=phrasings[i], calls=[(each, True)], tenant="acme")
    query = "seal my latest work in the repo"
    fresh = hits(conn, embedder, query, tenant="acme")[tool]["scores"]["learned"]
    age(conn, tool=tool, days=30)
    month = hits(conn, embedder, query, tenant="acme")[tool]["scores"]["learned"]
    assert 0 < month < fresh
    age(conn, tool=tool, days=FORGET_AFTER_DAYS + 1)
    (done,) = consolidate(conn)
    # git_commit's three runs are not read: 12 runs, each other tool's newest held back.
    assert (done.trained_on, done.held_back) == (8, 4)
    assert (done.adapter.trained_on, done.adapter.held_back) == (8, 4)  # type: ignore[union-attr]


def age(conn: Conn, *, tool: str, days: float) -> None:
    """Make the tenant's runs of ``tool`` ``days`` old."""
    conn.execute(
        "UPDATE intent_tools SET created_at = now() - %s * interval '1 day' "
        "WHERE %s = ANY(tools_ok)",
        (days, tool),
    )
    conn.commit()
