"""Batch ingestion against real Postgres: a batch teaches exactly what one-at-a-time would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from shared.config import Settings
from shared.db import connect
from shared.embeddings import Embedder, get_embedder
from shared.executions.status import ExecutionStatus
from shared.executions.store import finish_execution
from shared.executions.trace import summarize
from shared.learning.ingest import IngestResult, ingest_executions

CODE_A = "d = await mcp.bench.fetch(id=args['id'])\nreturn await mcp.bench.store(value=d)"
# The same program as CODE_A, formatted differently: the same capability.
CODE_A_REFORMATTED = (
    "d = await mcp.bench.fetch(id = args['id'])  # fetch first\n\n"
    "return await mcp.bench.store(value = d)"
)
CODE_B = "return await mcp.bench.fetch(id=args.get('id', 'x1'))"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings(env="test"))


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with connect(pg_url) as c:
        c.execute(
            "INSERT INTO mcp_servers (name, transport, config) VALUES ('bench', 'stdio', '{}')"
        )
        for tool, schema in (
            ("fetch", {"type": "object", "properties": {"id": {"type": "string"}}}),
            ("store", {"type": "object", "properties": {"value": {}}}),
        ):
            c.execute(
                "INSERT INTO tools (id, server, name, input_schema, schema_hash) "
                "VALUES (%s, 'bench', %s, %s, 'h')",
                (f"bench:{tool}", tool, Jsonb(schema)),
            )
        c.commit()
        yield c


def trace(*calls: tuple[str, bool]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for n, (tool, ok) in enumerate(calls):
        base = {"call_id": f"c{n}", "tool": tool, "parent": None}
        events.append({"type": "tool_start", **base, "ts": 100.0 + n})
        events.append(
            {"type": "tool_end", **base, "ts": 100.5 + n, "duration_ms": 1.0, "ok": ok,
             "error": None if ok else {"type": "tool_error", "message": "boom"}}
        )  # fmt: skip
    return events


BOTH_OK = trace(("bench:fetch", True), ("bench:store", True))


def add_execution(
    conn: psycopg.Connection[dict[str, Any]],
    *,
    code: str,
    intent: str | None,
    events: list[dict[str, Any]],
    tenant: str = "default",
    duration_ms: float = 10.0,
    capability_id: str | None = None,
    status: str = "succeeded",
) -> str:
    row = conn.execute(
        "INSERT INTO executions (tenant_id, status, code, intent, timeout_s, trace, duration_ms, "
        "capability_id, finished_at, result) "  # a result: an empty one is no evidence
        "VALUES (%s, %s, %s, %s, 30, %s, %s, %s, now(), '{\"ok\": true}') RETURNING id",
        (tenant, status, code, intent, Jsonb(events), duration_ms, capability_id),
    ).fetchone()
    conn.commit()
    assert row is not None
    return str(row["id"])


def ingest(
    conn: psycopg.Connection[dict[str, Any]], ids: list[str], embedder: Embedder
) -> dict[str, IngestResult]:
    results = ingest_executions(conn, execution_ids=ids, embedder=embedder)
    conn.commit()
    return results


def edge_counts(conn: psycopg.Connection[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    rows = conn.execute("SELECT src, dst, kind, count FROM tool_edges").fetchall()
    return {(r["src"], r["dst"], r["kind"]): r["count"] for r in rows}


def capability_edges(
    conn: psycopg.Connection[dict[str, Any]], tenant: str
) -> dict[tuple[str, str, str], int]:
    """A tenant's capability → tool edges, by code hash (ids differ between tenants)."""
    rows = conn.execute(
        "SELECT c.code_hash, e.dst, e.kind, e.count FROM tool_edges e "
        "JOIN capabilities c ON e.src = 'cap:' || c.id WHERE c.tenant_id = %s",
        (tenant,),
    ).fetchall()
    return {(r["code_hash"], r["dst"], r["kind"]): r["count"] for r in rows}


def capability(conn: psycopg.Connection[dict[str, Any]], code_of: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT c.* FROM capabilities c JOIN executions e ON e.code = %s "
        "AND (e.extras->'capability'->>'id')::uuid = c.id LIMIT 1",
        (code_of,),
    ).fetchone()
    assert row is not None, code_of
    return row


def test_one_batch_learns_creates_updates_reruns_and_skips_each_execution_once(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    a1 = add_execution(conn, code=CODE_A, intent="fetch a record and store it", events=BOTH_OK)
    a2 = add_execution(
        conn, code=CODE_A_REFORMATTED, intent="copy a record", events=BOTH_OK, duration_ms=30.0
    )
    b1 = add_execution(
        conn, code=CODE_B, intent="fetch one record", events=trace(("bench:fetch", True))
    )
    failed = add_execution(
        conn,
        code="return await mcp.bench.store(value=1)",
        intent="store a value",
        events=trace(("bench:fetch", True), ("bench:store", False)),
    )
    missing = str(uuid.uuid4())
    results = ingest(conn, [a1, a2, b1, failed, missing, a1], embedder)

    assert list(results) == [a1, a2, b1, failed, missing]
    assert {i: r.outcome for i, r in results.items()} == {
        a1: "learned",
        a2: "updated",
        b1: "learned",
        failed: "skipped",
        missing: "missing",
    }
    assert results[failed].failed_tools == ["bench:store"]
    cap_a = capability(conn, CODE_A)
    assert (cap_a["usage_count"], cap_a["success_count"], cap_a["avg_duration_ms"]) == (2, 2, 20.0)
    assert cap_a["intent"] == "fetch a record and store it"  # the first run names it
    assert cap_a["parameters_schema"]["properties"]["id"]["type"] == "string"  # from bench:fetch
    cap_b = capability(conn, CODE_B)
    assert cap_b["usage_count"] == 1
    assert cap_b["parameters_schema"].get("required", []) == []  # defaulted argument
    assert cap_a["id"] != cap_b["id"]
    # Each execution's response sees the capability as of its own run.
    extras = {
        r["id"]: r["extras"]
        for r in conn.execute(
            "SELECT id::text, extras FROM executions WHERE id = ANY(%s::uuid[])", ([a1, a2],)
        ).fetchall()
    }
    assert extras[a1]["capability"]["status"] == "created"
    assert extras[a1]["capability"]["usage_count"] == 1
    assert extras[a2]["capability"]["status"] == "updated"
    assert extras[a2]["capability"]["usage_count"] == 2
    # The failed run saved nothing but still taught the graph.
    edges = edge_counts(conn)
    assert edges[("bench:fetch", "bench:store", "sequence")] == 3  # a1, a2 and the failed run
    assert conn.execute("SELECT count(*) AS n FROM capabilities").fetchone() == {"n": 2}
    unlearned = conn.execute(
        "SELECT count(*) AS n FROM executions WHERE learned_at IS NULL"
    ).fetchone()
    assert unlearned == {"n": 0}

    # Redelivered: nothing changes.
    again = ingest(conn, [a1, a2, b1, failed], embedder)
    assert {r.outcome for r in again.values()} == {"already_ingested"}
    assert capability(conn, CODE_A)["usage_count"] == 2
    edge = conn.execute(
        "SELECT count FROM tool_edges WHERE kind = 'sequence' AND src = 'bench:fetch'"
    ).fetchone()
    assert edge == {"count": 3}


def test_reruns_and_known_code_in_one_batch_fold_into_the_capability_stats(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    first = add_execution(conn, code=CODE_A, intent="fetch a record and store it", events=BOTH_OK)
    ingest(conn, [first], embedder)
    cap_id = str(capability(conn, CODE_A)["id"])
    known = add_execution(conn, code=CODE_A, intent="again", events=BOTH_OK, duration_ms=40.0)
    rerun_ok = add_execution(
        conn, code=CODE_A, intent=None, events=BOTH_OK, capability_id=cap_id, duration_ms=10.0
    )
    rerun_failed = add_execution(
        conn,
        code=CODE_A,
        intent=None,
        events=trace(("bench:fetch", False)),
        capability_id=cap_id,
        status="failed",
        duration_ms=20.0,
    )
    results = ingest(conn, [known, rerun_ok, rerun_failed], embedder)

    assert [r.outcome for r in results.values()] == ["updated", "rerun", "rerun"]
    cap = capability(conn, CODE_A)
    assert (cap["usage_count"], cap["success_count"], cap["failure_count"]) == (4, 3, 1)
    assert cap["success_rate"] == pytest.approx(0.75)
    assert cap["avg_duration_ms"] == pytest.approx((10.0 + 40.0 + 10.0 + 20.0) / 4)
    # The failed re-run was a false positive of the match: the threshold moved up.
    outcomes = conn.execute(
        "SELECT samples FROM adaptive_thresholds WHERE context = 'capability_matching'"
    ).fetchone()
    assert outcomes is not None and outcomes["samples"][-2:] == ["true_positive", "false_positive"]


def test_a_batch_teaches_the_same_as_one_execution_at_a_time(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    runs = [
        (CODE_A, "fetch a record and store it", BOTH_OK, 10.0),
        (CODE_B, "fetch one record", trace(("bench:fetch", True)), 5.0),
        (CODE_A_REFORMATTED, "copy a record", BOTH_OK, 30.0),
        (CODE_A, "fetch and store", trace(("bench:fetch", True), ("bench:store", False)), 7.0),
        (CODE_B, "fetch one record", trace(("bench:fetch", True)), 15.0),
    ]

    def learn(tenant: str, *, batch: bool) -> dict[str, tuple[Any, ...]]:
        ids = [
            add_execution(conn, code=c, intent=i, events=t, tenant=tenant, duration_ms=d)
            for c, i, t, d in runs
        ]
        if batch:
            ingest(conn, ids, embedder)
        else:
            for execution_id in ids:
                ingest(conn, [execution_id], embedder)
        rows = conn.execute(
            "SELECT code_hash, name, usage_count, success_count, failure_count, success_rate, "
            "avg_duration_ms, tools_used, parameters_schema, code FROM capabilities "
            "WHERE tenant_id = %s",
            (tenant,),
        ).fetchall()
        return {r["code_hash"]: tuple(r.values()) for r in rows}

    one_at_a_time = learn("one", batch=False)
    edges_after_one = edge_counts(conn)
    batched = learn("batch", batch=True)
    edges_after_both = edge_counts(conn)
    assert batched == one_at_a_time
    assert len(batched) == 2
    tool_edges = {k: v for k, v in edges_after_one.items() if not k[0].startswith("cap:")}
    assert tool_edges and all(edges_after_both[k] == 2 * v for k, v in tool_edges.items())
    assert capability_edges(conn, "batch") == capability_edges(conn, "one") != {}


def test_learning_reads_the_stored_summary_and_decodes_rows_stored_before_it(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    # Finished by the worker's path: the summary is stored beside the trace.
    fresh = add_execution(conn, code=CODE_B, intent=None, events=[], status="running")
    finish_execution(conn, execution_id=fresh, status=ExecutionStatus.SUCCEEDED, trace=BOTH_OK)
    row = conn.execute("SELECT trace_summary FROM executions WHERE id = %s", (fresh,)).fetchone()
    assert row is not None and row["trace_summary"] == summarize(BOTH_OK).as_dict()
    # Emptied trace: whatever learning teaches now, it read from the summary.
    conn.execute("UPDATE executions SET trace = '[]'::jsonb WHERE id = %s", (fresh,))
    conn.commit()
    # Stored before migration 0017 (no summary): its trace is decoded instead.
    old = add_execution(conn, code=CODE_B, intent=None, events=trace(("bench:store", True),
                                                                     ("bench:fetch", True)))  # fmt: skip
    ingest(conn, [fresh, old], embedder)
    sequences = {k: n for k, n in edge_counts(conn).items() if k[2] == "sequence"}
    assert sequences == {
        ("bench:fetch", "bench:store", "sequence"): 1,
        ("bench:store", "bench:fetch", "sequence"): 1,
    }


def test_a_callers_refusal_rate_limit_policy_approval_or_cancel_never_counts_against_it(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    """A re-run whose call the caller's allow-list, rate limit or policy refused, or whose
    approval a person denied or left unanswered, leaves the capability's stats (and the
    ``capability_runs_total`` metric, fed by ``rerun_ok``) as they were: it says nothing of
    the capability's code. The code caught the policy's refusal and succeeded: no more."""
    first = add_execution(conn, code=CODE_A, intent="fetch a record and store it", events=BOTH_OK)
    ingest(conn, [first], embedder)
    before = capability(conn, CODE_A)
    cap_id = str(before["id"])

    def refused_call(error_type: str) -> list[dict[str, Any]]:
        base = {"call_id": "c0", "tool": "bench:fetch", "parent": None}
        return [
            {"type": "tool_start", **base, "ts": 100.0},
            {"type": "tool_end", **base, "ts": 100.5, "duration_ms": 1.0, "ok": False,
             "error": {"type": error_type, "message": "refused"}},
        ]  # fmt: skip

    not_allowed = add_execution(conn, code=CODE_A, intent=None, capability_id=cap_id,
                                events=refused_call("tool_not_allowed"), status="failed")  # fmt: skip
    call_limited = add_execution(conn, code=CODE_A, intent=None, capability_id=cap_id,
                                 events=refused_call("rate_limited"), status="failed")  # fmt: skip
    policy_denied = add_execution(conn, code=CODE_A, intent=None, capability_id=cap_id,
                                  events=refused_call("policy_denied"), status="succeeded")  # fmt: skip
    approval_denied = add_execution(conn, code=CODE_A, intent=None, capability_id=cap_id,
                                    events=refused_call("approval_denied"), status="failed")  # fmt: skip
    approval_timeout = add_execution(conn, code=CODE_A, intent=None, capability_id=cap_id,
                                     events=refused_call("approval_timeout"), status="failed")  # fmt: skip
    cancelled = add_execution(
        conn, code=CODE_A, intent=None, events=[], capability_id=cap_id, status="cancelled"
    )
    run_limited = add_execution(
        conn, code=CODE_A, intent=None, events=[], capability_id=cap_id, status="failed"
    )
    conn.execute(
        "UPDATE executions SET error = %s WHERE id = %s",
        (Jsonb({"type": "rate_limited", "message": "too many"}), run_limited),
    )
    conn.commit()
    results = ingest(
        conn,
        [not_allowed, call_limited, policy_denied, approval_denied, approval_timeout, cancelled,
         run_limited],
        embedder,
    )  # fmt: skip

    assert all(r.rerun_ok is None and r.capability is None for r in results.values()), results
    after = capability(conn, CODE_A)
    stats = ("usage_count", "success_count", "failure_count", "success_rate")
    assert [after[f] for f in stats] == [before[f] for f in stats] == [1, 1, 0, 1.0]
    # Nor do they move the matching threshold: they say nothing about the match.
    row = conn.execute(
        "SELECT samples FROM adaptive_thresholds WHERE context = 'capability_matching'"
    ).fetchone()
    assert row is None or "false_positive" not in row["samples"]


def test_a_direct_call_is_shown_no_suggestions_and_still_uses_earlier_ones(
    conn: psycopg.Connection[dict[str, Any]], embedder: Embedder
) -> None:
    # The graph learns fetch -> store; a run that fetched is then suggested store.
    ingest(conn, [add_execution(conn, code=CODE_A, intent="copy", events=BOTH_OK)], embedder)
    fetched = trace(("bench:fetch", True))
    run = add_execution(conn, code=CODE_B, intent=None, events=fetched)
    direct = add_execution(conn, code=CODE_B, intent=None, events=fetched)
    conn.execute(
        "UPDATE executions SET extras = %s WHERE id = %s",
        (Jsonb({"direct": {"session": "s", "after": None, "tool": "bench:fetch"}}), direct),
    )
    conn.commit()
    results = ingest(conn, [run, direct], embedder)
    assert results[run].suggested >= 1 and results[direct].suggested == 0

    def shown(execution_id: str) -> tuple[list[Any], int]:
        row = conn.execute(
            "SELECT extras->'suggestions' AS s, learned_at, (SELECT count(*) FROM "
            "suggestion_feedback f WHERE f.execution_id = e.id) AS n FROM executions e "
            "WHERE id = %s",
            (execution_id,),
        ).fetchone()
        assert row is not None and row["learned_at"] is not None
        return row["s"], row["n"]

    suggested, recorded = shown(run)
    assert any(s["id"] == "bench:store" for s in suggested) and recorded == len(suggested)
    assert shown(direct) == ([], 0)  # answered before learning: nobody would see them
    # A later direct call of the suggested tool is a use of what the run was shown.
    later = add_execution(conn, code=CODE_B, intent=None, events=trace(("bench:store", True)))
    conn.execute(
        "UPDATE executions SET extras = %s WHERE id = %s",
        (Jsonb({"direct": {"session": "s", "after": "bench:fetch", "tool": "bench:store"}}), later),
    )
    conn.commit()
    assert ingest(conn, [later], embedder)[later].suggestions_used == 1
