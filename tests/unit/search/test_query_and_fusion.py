"""Query clause splitting, lexeme cleaning and weighted reciprocal-rank fusion."""

from __future__ import annotations

from shared.search.fusion import explain
from shared.search.lexical import idf
from shared.search.query import MAX_CLAUSES, lexeme_words, query_clauses


def test_multi_step_request_is_split_into_clauses() -> None:
    clauses = query_clauses(
        "Fetch the latest stock prices, draw a bar chart and then write a PDF report."
    )
    assert clauses == ["Fetch the latest stock prices", "draw a bar chart", "write a PDF report."]


def test_single_step_request_has_no_clauses() -> None:
    assert query_clauses("get the weather in Paris") == []
    assert len(query_clauses(", ".join(f"step number {i}" for i in range(10)))) == MAX_CLAUSES


def test_lexemes_become_query_safe_words() -> None:
    assert lexeme_words(["well-format", "report.pdf", "a|b", "pdf"]) == [
        "well",
        "format",
        "report",
        "pdf",
        "a",
        "b",
    ]


def test_rare_words_weigh_more() -> None:
    assert idf(total=1000, frequency=1) > idf(total=1000, frequency=300) > 0


def test_explain_names_the_signals() -> None:
    why = explain(
        parts={"semantic": 0.61, "description": 0.04, "graph": 0.05},
        matched_words={"description": ["pdf", "report"]},
        graph_reasons=["often follows fs:read_file"],
        support=0.5,
    )
    assert "semantic similarity 0.61 (+0.610)" in why
    assert "description: pdf, report (+0.040)" in why
    assert "often follows fs:read_file, scaled by support 0.50 (+0.050)" in why
    assert explain(parts={}) == "weak match on every signal"
