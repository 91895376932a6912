"""The in-memory tool graph follows committed edges, and its version never makes writers wait."""

from __future__ import annotations

import time

import psycopg
import pytest

from shared.db import connect
from shared.search import graph_snapshot
from shared.search.graph_signals import context_graph_scores
from tests.integration.discovery.helpers import insert_edge


def _following(pg_url: str) -> dict[str, float]:
    with connect(pg_url) as conn:
        scores = context_graph_scores(conn, context_tools=["a:read"], candidates=[])
    return scores.score


def test_a_search_sees_every_committed_edge(pg_url: str) -> None:
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="b:summarise", weight=2.0)
    assert _following(pg_url) == {"b:summarise": 1.0}
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="c:mail", weight=4.0)
        conn.execute("UPDATE tool_edges SET weight = 8 WHERE dst = 'b:summarise'")
        conn.execute(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) "
            "VALUES ('a:read', 'd:draft', 'sequence', 1, 1)"
        )
        # The update and the insert are not committed yet: other connections see the
        # committed graph, with the new c:mail edge (insert_edge commits).
        assert _following(pg_url) == {"b:summarise": 0.5, "c:mail": 1.0}
        conn.commit()
    assert _following(pg_url) == {"b:summarise": 1.0, "c:mail": 0.5, "d:draft": 0.125}
    with connect(pg_url) as conn:
        conn.execute("DELETE FROM tool_edges WHERE dst = 'b:summarise'")
        conn.commit()
    assert _following(pg_url) == {"c:mail": 1.0, "d:draft": 0.25}


def test_a_slow_graph_reloads_in_the_background(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="b:summarise", weight=2.0)
    assert _following(pg_url) == {"b:summarise": 1.0}  # first load: in the request
    monkeypatch.setattr(graph_snapshot, "SYNC_RELOAD_MS", -1.0)  # every load counts as slow
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="c:mail", weight=4.0)
    # The search that finds the graph stale answers from the old one at once...
    assert _following(pg_url) == {"b:summarise": 1.0}
    # ...and the reload it started brings the new edge (a bounded wait, not a timing).
    deadline = time.monotonic() + 20
    while _following(pg_url) != {"b:summarise": 0.5, "c:mail": 1.0}:
        assert time.monotonic() < deadline, "the background reload never landed"
        time.sleep(0.05)


def test_concurrent_edge_writers_do_not_wait_for_each_other(pg_url: str) -> None:
    with connect(pg_url) as first, connect(pg_url) as second:
        first.execute(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) "
            "VALUES ('a:x', 'a:y', 'sequence', 1, 1)"
        )
        # The first transaction is still open: a second writer must not block on the
        # version (lock_timeout turns a wait into an error).
        second.execute("SET lock_timeout = '2s'")
        try:
            second.execute(
                "INSERT INTO tool_edges (src, dst, kind, weight, count) "
                "VALUES ('b:x', 'b:y', 'sequence', 1, 1)"
            )
        except psycopg.errors.LockNotAvailable:
            pytest.fail("the second edge writer waited for the first one's version row")
        second.commit()
        first.commit()
    with connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) AS n, sum(writes) AS w FROM tool_edges_writes"
        ).fetchone()
    assert row is not None and row["n"] == 2 and row["w"] == 2


def test_a_graph_read_with_edges_that_rolled_back_is_not_reused(pg_url: str) -> None:
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="b:summarise", weight=2.0)
        conn.execute(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) "
            "VALUES ('a:read', 'x:phantom', 'sequence', 9, 1)"
        )
        # Its own search sees its own uncommitted edge...
        scores = context_graph_scores(conn, context_tools=["a:read"], candidates=[])
        assert set(scores.score) == {"b:summarise", "x:phantom"}
        conn.rollback()
    # ...and after the rollback another single-statement write brings the write count
    # back to the same sum: the phantom edge must not come back with it.
    with connect(pg_url) as conn:
        insert_edge(conn, src="a:read", dst="c:mail", weight=2.0)
    assert _following(pg_url) == {"b:summarise": 1.0, "c:mail": 1.0}


def test_ended_writers_fold_into_one_row_without_moving_the_version(pg_url: str) -> None:
    for dst in ("b:summarise", "c:mail", "d:draft"):  # three connections, three backends
        with connect(pg_url) as conn:
            insert_edge(conn, src="a:read", dst=dst, weight=1.0)
    with connect(pg_url) as conn:
        version = graph_snapshot.graph_version(conn.execute(graph_snapshot.GRAPH_VERSION_SQL))
        rows = conn.execute("SELECT count(*) AS n FROM tool_edges_writes").fetchone()
        assert rows is not None and rows["n"] == 3
        graph_snapshot.fold_ended_writers(conn)
        conn.commit()
        left = conn.execute("SELECT backend_pid, writes FROM tool_edges_writes").fetchall()
        assert left == [{"backend_pid": 0, "writes": 3}]
        again = graph_snapshot.graph_version(conn.execute(graph_snapshot.GRAPH_VERSION_SQL))
    assert again == version
    assert _following(pg_url) == {"b:summarise": 1.0, "c:mail": 1.0, "d:draft": 1.0}
