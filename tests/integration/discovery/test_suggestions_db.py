"""Suggestions: empty (not failing) on an empty graph, useful after learning; feedback recorded."""

from __future__ import annotations

from shared.db import connect
from shared.matching.thresholds import set_threshold
from shared.suggestions import mark_used, record_shown, suggest
from tests.integration.discovery.helpers import basis, insert_capability, insert_edge, insert_tool


def test_empty_graph_gives_no_suggestions(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert suggest(conn, context_tools=["files:read_file"], tenant_id="default") == []
        assert suggest(conn, context_tools=[], tenant_id="default") == []


def _learned_graph(pg_url: str) -> dict[str, str]:
    with connect(pg_url) as conn:
        for i, tool in enumerate(
            ["files:read_file", "files:write_file", "text:summarize", "mail:send"]
        ):
            insert_tool(conn, tool_id=tool, description=tool, embedding=basis(i), community=0)
        insert_edge(conn, src="files:read_file", dst="text:summarize", weight=2.0)
        insert_edge(conn, src="text:summarize", dst="files:write_file", weight=2.0)
        insert_edge(conn, src="files:read_file", dst="mail:send", kind="co_used", weight=0.5)
        insert_edge(conn, src="mail:send", dst="files:write_file", weight=1.0)
        proven = insert_capability(
            conn,
            name="summarize_file",
            embedding=basis(10),
            success_rate=1.0,
            usage_count=10,
            tools_used=["files:read_file", "text:summarize"],
        )
        flaky = insert_capability(
            conn,
            name="rarely_works",
            embedding=basis(11),
            success_rate=0.2,
            usage_count=1,
            tools_used=["files:read_file"],
        )
    return {"proven": proven, "flaky": flaky}


def test_suggestions_after_learning(pg_url: str) -> None:
    caps = _learned_graph(pg_url)
    with connect(pg_url) as conn:
        found = suggest(conn, context_tools=["files:read_file"], tenant_id="default")
    ids = [s["id"] for s in found]
    assert 0 < len(found) <= 5
    assert len(ids) == len(set(ids))
    assert caps["proven"] in ids and caps["flaky"] not in ids  # lazy filter: 1.0 vs 0.16
    assert "text:summarize" in ids  # the observed next step
    assert "files:read_file" not in ids
    assert all(s["reason"] for s in found)
    kinds = {s["type"] for s in found}
    assert {"capability", "next_tool"} <= kinds
    assert [s["score"] for s in found] == sorted((s["score"] for s in found), reverse=True)


def test_the_adaptive_threshold_filters_capabilities(pg_url: str) -> None:
    caps = _learned_graph(pg_url)
    with connect(pg_url) as conn:
        set_threshold(conn, context="suggestions", value=0.4, reason="test")
        low = [
            s["id"] for s in suggest(conn, context_tools=["files:read_file"], tenant_id="default")
        ]
        with conn.transaction():
            conn.execute("UPDATE capabilities SET success_rate = 0.6, usage_count = 1")
        high_value = 0.9
        set_threshold(conn, context="suggestions", value=high_value, reason="test")
        high = [
            s["id"] for s in suggest(conn, context_tools=["files:read_file"], tenant_id="default")
        ]
    assert caps["proven"] in low
    assert caps["proven"] not in high and caps["flaky"] not in high


def test_feedback_marks_used_suggestions(pg_url: str) -> None:
    _learned_graph(pg_url)
    with connect(pg_url) as conn:
        shown = suggest(conn, context_tools=["files:read_file"], tenant_id="default")
        assert record_shown(conn, suggestions=shown, tenant_id="default") == len(shown)
        used = mark_used(conn, used_ids=["text:summarize"], tenant_id="default")
        rows = conn.execute(
            "SELECT suggested_id, used FROM suggestion_feedback ORDER BY suggested_id"
        ).fetchall()
    assert used == 1
    assert {r["suggested_id"]: r["used"] for r in rows}["text:summarize"] is True
    assert sum(1 for r in rows if r["used"] is None) == len(shown) - 1


def test_unavailable_tools_are_not_suggested_and_their_capabilities_are_degraded(
    pg_url: str,
) -> None:
    caps = _learned_graph(pg_url)
    with connect(pg_url) as conn:
        before = suggest(conn, context_tools=["files:read_file"], tenant_id="default")
        with conn.transaction():  # the server of text:summarize left the configuration
            conn.execute("UPDATE tools SET available = false WHERE id = 'text:summarize'")
        after = suggest(conn, context_tools=["files:read_file"], tenant_id="default")
    assert before[0]["id"] == caps["proven"] and before[0]["degraded"] is False
    ids = [s["id"] for s in after]
    assert "text:summarize" in [s["id"] for s in before] and "text:summarize" not in ids
    proven = after[-1]  # after every runnable suggestion, whatever its score
    assert proven["id"] == caps["proven"] and len(after) > 1
    assert proven["degraded"] is True and proven["missing_tools"] == ["text:summarize"]
    assert not any(s.get("degraded") for s in after[:-1])
