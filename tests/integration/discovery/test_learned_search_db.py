"""Search and matching that learn, on real Postgres with the real model and the real ingestion."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from services.toolhost.sync import ToolSpec, sync_server_tools
from shared.capabilities.aliases import aliases_of
from shared.capabilities.lifecycle import delete
from shared.capabilities.manual import ManualCapability, create_manual, edit
from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.learning.ingest import ingest_executions
from shared.matching.capabilities import match_capabilities
from shared.search.fusion import WEIGHTS
from shared.search.hybrid import hybrid_tool_search
from shared.search.lexical import WORD_INDEXES
from tests.integration.discovery.helpers import insert_tool
from tests.integration.learning.test_ingest_batch_db import trace

Conn = psycopg.Connection[dict[str, Any]]
# The memory server's tools, as it describes them: "remember a fact about a person" is far
# from all of them in words and meaning, which is what past runs must fix.
TOOLS = {
    "memory:create_entities": "Create multiple new entities in the knowledge graph",
    "memory:add_observations": "Add new observations to existing entities in the knowledge graph",
    "memory:search_nodes": "Search for nodes in the knowledge graph based on a query",
    "memory:read_graph": "Read the entire knowledge graph",
    "time:get_current_time": "Get current time in a specific timezone",
    "filesystem:write_file": "Create a new file or completely overwrite an existing file",
    "filesystem:read_text_file": "Read the complete contents of a file as text",
    "git:git_commit": "Records changes to the repository",
}
INTENT = "remember a fact about a person"
PARAPHRASE = "remember this fact about a person"  # MiniLM cosine to INTENT 0.89


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings(env="test"))


@pytest.fixture
def conn(pg_url: str, embedder: Embedder) -> Iterator[Conn]:
    WORD_INDEXES.clear()
    with connect(pg_url) as c:
        vectors = embedder.embed([f"{t.split(':')[1]}: {d}" for t, d in TOOLS.items()])
        for (tool_id, description), vector in zip(TOOLS.items(), vectors, strict=True):
            insert_tool(c, tool_id=tool_id, description=description, embedding=vector)
        yield c


def run(
    conn: Conn,
    embedder: Embedder,
    *,
    intent: str,
    calls: list[tuple[str, bool]],
    tenant: str = "default",
    status: str = "succeeded",
    capability_id: str | None = None,
    ingest: bool = True,
) -> str:
    """A finished execution with these tool calls, ingested as the learning worker does
    (``ingest`` False: stored only, for the caller to ingest with others as one batch)."""
    events = trace(*calls)
    code = f"# {uuid.uuid4().hex}\n" + "\n".join(f"await mcp.{t}()" for t, _ in calls)
    row = conn.execute(
        "INSERT INTO executions (tenant_id, status, code, intent, timeout_s, trace, duration_ms, "
        "capability_id, finished_at, result) "  # a result: an empty one is no evidence
        "VALUES (%s, %s, %s, %s, 30, %s, 5, %s, now(), '{\"ok\": true}') RETURNING id",
        (tenant, status, code, intent, Jsonb(events), capability_id),
    ).fetchone()
    assert row is not None
    if ingest:
        ingest_executions(conn, execution_ids=[str(row["id"])], embedder=embedder)
    conn.commit()
    return str(row["id"])


def hits(
    conn: Conn, embedder: Embedder, query: str, *, tenant: str = "default"
) -> dict[str, dict[str, Any]]:
    """Every tool's hit (the catalogue has 8), best first, by id."""
    vector = embedder.embed_query([query])[0]
    found = hybrid_tool_search(
        conn, query=query, query_embedding=vector, limit=len(TOOLS), tenant_id=tenant
    )
    return {h["id"]: h for h in found}


# A run of a request teaches its tenant's searches for that request and its paraphrases;
# a request under the vote's floor (`shared.search.learned.FITTED`) moves nothing.
def test_one_execution_ranks_its_tool_first_for_a_paraphrase(
    conn: Conn, embedder: Embedder
) -> None:
    tool = "memory:create_entities"
    before = hits(conn, embedder, PARAPHRASE)
    assert next(iter(before)) != tool  # dense and words alone pick another tool
    assert before[tool]["scores"]["learned"] == 0.0
    run(conn, embedder, intent=INTENT, calls=[(tool, True)])
    after = hits(conn, embedder, PARAPHRASE)
    assert next(iter(after)) == tool
    assert after[tool]["scores"]["learned"] > 0
    # Another tenant's searches know nothing of it.
    other = hits(conn, embedder, PARAPHRASE, tenant="other")
    assert list(other) == list(before)
    assert other[tool]["scores"]["learned"] == 0.0


def test_an_unrelated_run_does_not_reorder(conn: Conn, embedder: Embedder) -> None:
    # Nothing the tenant ran is near the request (cosine under the vote's floor): the
    # ranking and every score stay the zero-shot ones.
    before = hits(conn, embedder, "commit my changes to the repository")
    run(conn, embedder, intent=INTENT, calls=[("memory:create_entities", True)])
    after = hits(conn, embedder, "commit my changes to the repository")
    assert [(t, h["score"]) for t, h in after.items()] == [
        (t, h["score"]) for t, h in before.items()
    ]


def test_with_no_evidence_the_ranking_is_the_zero_shot_one(conn: Conn, embedder: Embedder) -> None:
    # Another tenant's runs are no evidence for this one: its ranking equals the fusion with
    # the learned vote switched off, score for score.
    run(conn, embedder, intent=INTENT, calls=[("memory:create_entities", True)])
    vector = embedder.embed_query([PARAPHRASE])[0]
    learned = hybrid_tool_search(
        conn, query=PARAPHRASE, query_embedding=vector, limit=len(TOOLS), tenant_id="fresh"
    )
    zero_shot = hybrid_tool_search(
        conn,
        query=PARAPHRASE,
        query_embedding=vector,
        limit=len(TOOLS),
        tenant_id="fresh",
        weights={**WEIGHTS, "learned": 0.0},
    )
    assert [(h["id"], h["score"]) for h in learned] == [(h["id"], h["score"]) for h in zero_shot]
    assert all(h["scores"]["learned"] == 0.0 for h in learned)


def test_another_tenants_runs_leave_a_tenants_ranking_unchanged(
    conn: Conn, embedder: Embedder
) -> None:
    # Tenant B has learned something of its own; tenant A then runs the same request many
    # times with another tool, and with a failed call on B's tool. B's ranking is unchanged.
    run(conn, embedder, intent=INTENT, calls=[("memory:add_observations", True)], tenant="b")
    before = hits(conn, embedder, PARAPHRASE, tenant="b")
    for _ in range(3):
        run(
            conn,
            embedder,
            intent=PARAPHRASE,
            calls=[("memory:create_entities", True), ("memory:add_observations", False)],
            tenant="a",
        )
    after = hits(conn, embedder, PARAPHRASE, tenant="b")
    assert [(t, h["score"]) for t, h in after.items()] == [
        (t, h["score"]) for t, h in before.items()
    ]
    assert next(iter(after)) == "memory:add_observations"
    assert next(iter(hits(conn, embedder, PARAPHRASE, tenant="a"))) == "memory:create_entities"


def test_hit_says_it_was_used_before(conn: Conn, embedder: Embedder) -> None:
    run(conn, embedder, intent=INTENT, calls=[("memory:create_entities", True)])
    hit = hits(conn, embedder, PARAPHRASE)["memory:create_entities"]
    assert hit["scores"]["learned"] > 0
    assert "used for similar requests before" in hit["why"]


def test_failed_tool_calls_count_against(conn: Conn, embedder: Embedder) -> None:
    tool = "time:get_current_time"
    before = hits(conn, embedder, "what time is it in Tokyo")
    assert next(iter(before)) == tool
    for _ in range(3):
        run(
            conn,
            embedder,
            intent="what time is it in Tokyo right now",
            calls=[(tool, False)],
            status="failed",
        )
    after = hits(conn, embedder, "what time is it in Tokyo")[tool]
    # Three near-identical requests, all failed with it: the vote is all against (shrunk
    # toward zero-shot by the fitted prior, one intent's worth) and costs the tool most of a
    # fitted weight's worth of score; it stays listed (it is the only time tool here) with
    # the reason named.
    assert after["scores"]["learned"] < -0.6
    assert after["score"] < before[tool]["score"] - 0.2
    assert "failed for similar requests before" in after["why"]


def test_a_run_without_intent_teaches_nothing(conn: Conn, embedder: Embedder) -> None:
    run(conn, embedder, intent="", calls=[("memory:create_entities", True)])
    assert conn.execute("SELECT count(*) AS n FROM intent_tools").fetchone() == {"n": 0}


def capability_of(conn: Conn, execution_id: str) -> str:
    """The capability an execution's run was saved as (same code)."""
    row = conn.execute(
        "SELECT c.id FROM capabilities AS c JOIN executions AS e ON e.code = c.code WHERE e.id = %s",
        (execution_id,),
    ).fetchone()
    assert row is not None
    return str(row["id"])


def rerun(conn: Conn, embedder: Embedder, *, capability_id: str, intent: str) -> None:
    """The note-writing capability run again, asked for in other words."""
    run(
        conn,
        embedder,
        intent=intent,
        calls=[("filesystem:write_file", True)],
        capability_id=capability_id,
    )


def test_capability_keeps_distinct_phrasings_once(conn: Conn, embedder: Embedder) -> None:
    first = run(
        conn, embedder, intent="save a note to a file", calls=[("filesystem:write_file", True)]
    )
    capability_id = capability_of(conn, first)
    for intent in (
        "write my notes into a text file on disk",  # new phrasing: kept
        "write my notes into a text file on disk.",  # the same again: dropped
        "save a note to a file",  # the capability's own intent: dropped
    ):
        rerun(conn, embedder, capability_id=capability_id, intent=intent)
    assert aliases_of(conn, capability_id=capability_id) == [
        "write my notes into a text file on disk"
    ]


def test_matching_scores_the_best_alias(conn: Conn, embedder: Embedder) -> None:
    first = run(
        conn, embedder, intent="save a note to a file", calls=[("filesystem:write_file", True)]
    )
    capability_id = capability_of(conn, first)
    query = embedder.embed(["persist the meeting minutes as a document"])[0]
    own = np.asarray(embedder.embed(["save a note to a file"])[0])
    alias = "persist the meeting minutes to a document on disk"
    before = match_capabilities(conn, intent_embedding=query, limit=1)
    rerun(conn, embedder, capability_id=capability_id, intent=alias)
    after = match_capabilities(conn, intent_embedding=query, limit=1)
    assert after["capabilities"] and after["capabilities"][0]["id"] == capability_id
    assert after["capabilities"][0]["semantic_score"] > float(own @ np.asarray(query))
    assert (
        not before["capabilities"]
        or before["capabilities"][0]["semantic_score"] < after["capabilities"][0]["semantic_score"]
    )


def test_a_tool_gone_unavailable_gets_no_stale_vote(conn: Conn, embedder: Embedder) -> None:
    # Its server left the configuration (or is down): the tenant's past runs with it no
    # longer place it, and the other tools rank as they would without the vote.
    tool = "memory:create_entities"
    run(conn, embedder, intent=INTENT, calls=[(tool, True)])
    assert next(iter(hits(conn, embedder, PARAPHRASE))) == tool
    conn.execute("UPDATE tools SET available = false WHERE id = %s", (tool,))
    conn.commit()
    after = hits(conn, embedder, PARAPHRASE)
    assert tool not in after
    assert all(h["scores"]["learned"] == 0.0 for h in after.values())


def _resync_memory(conn: Conn, embedder: Embedder, *, changed: dict[str, str]) -> None:
    """The toolhost's sync of the memory server (``sync_server_tools``, as at connect or on
    ``tools/list_changed``): its tools now listed with the ``changed`` descriptions, and
    only those of ``TOOLS`` it still lists (a memory tool left out has vanished)."""
    listed = {**{t: d for t, d in TOOLS.items() if t.startswith("memory:")}, **changed}
    sync_server_tools(
        conn=conn,
        server="memory",
        tools=[
            ToolSpec(name=t.split(":", 1)[1], description=d, input_schema={})
            for t, d in listed.items()
            if d
        ],
        embed=embedder.embed,
    )
    conn.commit()


def test_a_changed_or_removed_tool_stops_receiving_its_past_votes(
    conn: Conn, embedder: Embedder
) -> None:
    # Drift: the server re-lists one tool with another meaning and stops listing another.
    # The runs learned against them no longer place them (the search ranks exactly as a
    # tenant with no runs), the rest of each run keeps teaching, and a new run teaches the
    # changed tool again.
    changed, removed = "memory:create_entities", "memory:read_graph"
    dump = "show me everything you have stored about everyone"
    run(conn, embedder, intent=INTENT, calls=[(changed, True), ("time:get_current_time", True)])
    run(conn, embedder, intent=dump, calls=[(removed, True)])
    assert hits(conn, embedder, PARAPHRASE)[changed]["scores"]["learned"] > 0
    assert hits(conn, embedder, dump)[removed]["scores"]["learned"] > 0

    new_meaning = "Delete entities and their relations from the knowledge graph"
    _resync_memory(conn, embedder, changed={changed: new_meaning, removed: ""})

    after = hits(conn, embedder, PARAPHRASE)
    assert after[changed]["description"] == new_meaning
    assert after[changed]["scores"]["learned"] == 0.0
    assert [(t, h["score"]) for t, h in after.items() if t != "time:get_current_time"] == [
        (t, h["score"])
        for t, h in hits(conn, embedder, PARAPHRASE, tenant="other").items()
        if t != "time:get_current_time"
    ]
    assert removed not in hits(conn, embedder, dump)
    stored = conn.execute(
        "SELECT intent, tools_ok FROM intent_tools WHERE tenant_id = 'default' ORDER BY id"
    ).fetchall()
    assert [(r["intent"], r["tools_ok"]) for r in stored] == [
        (INTENT, ["time:get_current_time"]),  # the unchanged tool keeps its evidence
        (dump, []),
    ]

    run(conn, embedder, intent=INTENT, calls=[(changed, True)])  # learned anew
    assert hits(conn, embedder, PARAPHRASE)[changed]["scores"]["learned"] > 0


def test_a_description_saved_unchanged_keeps_the_votes(conn: Conn, embedder: Embedder) -> None:
    # A re-sync that lists the same tools (every reconnect does) forgets nothing.
    tool = "memory:create_entities"
    run(conn, embedder, intent=INTENT, calls=[(tool, True)])
    before = hits(conn, embedder, PARAPHRASE)[tool]["scores"]["learned"]
    _resync_memory(conn, embedder, changed={})
    assert hits(conn, embedder, PARAPHRASE)[tool]["scores"]["learned"] == before > 0


def test_a_capabilitys_phrasings_teach_the_tool_search(conn: Conn, embedder: Embedder) -> None:
    # A capability's aliases (here given by a person; runs and accepted matches add theirs)
    # vote for its tools as past runs do: the tenant's search for a paraphrase of one
    # ranks the capability's tool first, another tenant's does not move, and the vote
    # goes with the alias.
    tool = "memory:create_entities"
    before = hits(conn, embedder, PARAPHRASE)
    assert next(iter(before)) != tool
    item, _ = create_manual(
        conn,
        tenant_id="default",
        spec=ManualCapability(
            code="await mcp.memory.create_entities(entities=[])",
            intent="add a new person to the graph",
            aliases=[INTENT],
        ),
        embedder=embedder,
    )
    conn.commit()
    after = hits(conn, embedder, PARAPHRASE)
    assert next(iter(after)) == tool
    learned = after[tool]["scores"]["learned"]
    assert learned > 0
    assert list(hits(conn, embedder, PARAPHRASE, tenant="other")) == list(before)
    edit(
        conn,
        tenant_id="default",
        capability_id=item["id"],
        changes={"aliases": []},
        embedder=embedder,
    )
    conn.commit()
    # The alias's vote is gone; the capability's own intent, a farther phrasing, still
    # says a little, until the capability goes.
    assert 0 < hits(conn, embedder, PARAPHRASE)[tool]["scores"]["learned"] < learned
    delete(conn, tenant_id="default", capability_id=item["id"])
    conn.commit()
    assert hits(conn, embedder, PARAPHRASE)[tool]["scores"]["learned"] == 0.0


def test_a_run_of_a_phrasing_counts_once(conn: Conn, embedder: Embedder) -> None:
    # The run that taught a capability its intent holds that evidence: the capability's
    # own phrasing row gives way, so the same words never vote twice.
    tool = "memory:create_entities"
    run(conn, embedder, intent=INTENT, calls=[(tool, True)])
    rows = conn.execute(
        "SELECT execution_id IS NOT NULL AS is_run FROM intent_tools WHERE intent = %s",
        (INTENT,),
    ).fetchall()
    assert [r["is_run"] for r in rows] == [True]
