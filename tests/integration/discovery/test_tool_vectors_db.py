"""Consolidated tool vectors on real Postgres, the real model and real ingestion:
a consolidation lifts a learned tool for its tenant only, a version scoring worse on the
held-back runs is not shipped, and a changed or removed tool gets no stale vector."""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.embeddings import Embedder
from shared.learning.consolidate import consolidate, consolidate_tenant, current_vectors
from shared.search.hybrid import gather_evidence
from shared.search.tool_vectors import Mix
from tests.integration.discovery.test_learned_search_db import TOOLS, Conn, conn, embedder, run

__all__ = ["conn", "embedder"]  # fixtures

MEMORY = "memory:create_entities"
TIME = "time:get_current_time"
# How a tenant asks for MEMORY; the query is a new phrasing of the same need.
PHRASINGS = [
    "remember that Alice works at Acme",
    "note that Bob lives in Paris",
    "keep in mind that Carol likes tea",
]
QUERY = "store the fact that Dave is a doctor"
# The test's mix: one intent weighs as much as the description, and the vector replaces
# the description's cosine (the fitted mix moves less; the mechanics are the same).
MIX = Mix(k=1.0, weight=1.0)


def toolvec(conn: Conn, embedder: Embedder, query: str, *, tenant: str) -> dict[str, float]:
    vector = embedder.embed_query([query])[0]
    evidence = gather_evidence(
        conn, query=query, query_embedding=vector, tenant_id=tenant, tool_vectors=True
    )
    return {t: f["toolvec"] for t, f in evidence.features.items() if "toolvec" in f}


def versions(conn: Conn, tenant: str) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT version, trained_on, held_back, score_before, score_after, shipped "
        "FROM tool_vector_versions WHERE tenant_id = %s ORDER BY version",
        (tenant,),
    ).fetchall()


def test_a_consolidation_lifts_a_learned_tool_for_its_tenant_only(
    conn: Conn, embedder: Embedder
) -> None:
    for phrasing in PHRASINGS:
        run(conn, embedder, intent=phrasing, calls=[(MEMORY, True)], tenant="acme")
    assert toolvec(conn, embedder, QUERY, tenant="acme") == {}  # nothing consolidated yet
    done = consolidate(conn, mix=MIX)
    assert [(c.tenant_id, c.version, c.shipped) for c in done] == [("acme", 1, True)]
    assert (done[0].trained_on, done[0].held_back) == (2, 1)
    assert done[0].score_after >= done[0].score_before
    gained = toolvec(conn, embedder, QUERY, tenant="acme")
    assert set(gained) == {MEMORY} and gained[MEMORY] > 0
    # Another tenant: no vector, its evidence is the zero-shot one.
    assert toolvec(conn, embedder, QUERY, tenant="other") == {}
    # Nothing new: the next pass has nothing to do.
    assert consolidate(conn, mix=MIX) == []
    assert [v["version"] for v in versions(conn, "acme")] == [1]
    # A run taken back (unteach drops its row): the next pass refits without it.
    conn.execute("DELETE FROM intent_tools WHERE intent = %s", (PHRASINGS[0],))
    conn.commit()
    (again,) = consolidate(conn, mix=MIX)
    assert (again.version, again.trained_on + again.held_back) == (2, 2)


def test_a_version_scoring_worse_on_held_back_runs_is_not_shipped(
    conn: Conn, embedder: Embedder
) -> None:
    held_intent = "remember that Erin plays chess"
    run(conn, embedder, intent="what time is it in Tokyo", calls=[(TIME, True)], tenant="acme")
    run(conn, embedder, intent=held_intent, calls=[(TIME, True)], tenant="acme")  # held back
    # The version in use answers the held-back run (its vector for TIME is that request).
    perfect = np.asarray(embedder.embed([held_intent])[0], np.float32)
    conn.execute(
        "INSERT INTO tool_vector_versions (tenant_id, version, trained_on, held_back, "
        "shipped, last_intent_id, seconds) VALUES ('acme', 1, 1, 0, true, 0, 0)"
    )
    conn.execute(
        "INSERT INTO tool_vectors (tenant_id, tool_id, version, vector, intents, "
        "description_md5) SELECT 'acme', id, 1, %s, 1, md5(description) FROM tools WHERE id = %s",
        (perfect, TIME),
    )
    conn.commit()
    done = consolidate_tenant(conn, tenant_id="acme", mix=MIX)
    conn.commit()
    assert (done.version, done.shipped) == (2, False)
    assert (done.score_before, done.score_after) == (1.0, 0.0)
    in_use, vectors = current_vectors(conn, tenant_id="acme")
    assert in_use == 1
    np.testing.assert_allclose(vectors[TIME], perfect, atol=1e-6)
    assert [(v["version"], v["shipped"]) for v in versions(conn, "acme")] == [
        (1, True),
        (2, False),
    ]


def test_a_changed_or_removed_tool_gets_no_stale_vector(conn: Conn, embedder: Embedder) -> None:
    for phrasing in PHRASINGS:
        run(conn, embedder, intent=phrasing, calls=[(MEMORY, True)], tenant="acme")
        run(conn, embedder, intent=phrasing + " at noon", calls=[(TIME, True)], tenant="acme")
    consolidate(conn, mix=MIX)
    assert set(toolvec(conn, embedder, QUERY, tenant="acme")) == {MEMORY, TIME}
    # MEMORY's description changes: its vector was mixed with the old one, so it is unused
    # until the next consolidation mixes the new one.
    conn.execute("UPDATE tools SET description = 'Create entities' WHERE id = %s", (MEMORY,))
    # TIME leaves the catalogue.
    conn.execute("DELETE FROM tools WHERE id = %s", (TIME,))
    conn.commit()
    assert toolvec(conn, embedder, QUERY, tenant="acme") == {}
    assert set(current_vectors(conn, tenant_id="acme")[1]) == set()
    # A new run triggers a pass: MEMORY gets a vector of its new description, TIME none.
    run(conn, embedder, intent="remember that Finn owns a boat", calls=[(MEMORY, True)],
        tenant="acme")  # fmt: skip
    (done,) = consolidate(conn, mix=MIX)
    assert done.shipped
    stored = conn.execute(
        "SELECT tool_id FROM tool_vectors WHERE tenant_id = 'acme' ORDER BY tool_id"
    ).fetchall()
    assert [r["tool_id"] for r in stored] == [MEMORY]
    assert set(toolvec(conn, embedder, QUERY, tenant="acme")) == {MEMORY}
    assert len(TOOLS) == 8  # the catalogue the fixture indexed
