"""Query clause splitting, lexeme cleaning and weighted reciprocal-rank fusion."""

from __future__ import annotations

from shared.search.fusion import explain
from shared.search.hybrid import embed_texts_for_query, split_clauses
from shared.search.lexical import idf
from shared.search.query import MAX_CLAUSES, lexeme_words, query_clauses, query_frame


def test_multi_step_request_is_split_into_clauses() -> None:
    clauses = query_clauses(
        "Fetch the latest stock prices, draw a bar chart and then write a PDF report."
    )
    assert clauses == ["Fetch the latest stock prices", "draw a bar chart", "write a PDF report."]


def test_single_step_request_has_no_clauses() -> None:
    assert query_clauses("get the weather in Paris") == []
    assert len(query_clauses(", ".join(f"step number {i}" for i in range(10)))) == MAX_CLAUSES


def test_a_requests_frame_leaves_its_payload_out() -> None:
    # What follows "that", a colon or a dash, quoted text, names and numbers are the payload.
    assert query_frame("note that Priya moved to the Lisbon office") == "note"
    assert query_frame("save: Bob is Carol's manager") == "save"
    assert query_frame("make a note - the gate code is 2291") == "make a note"
    assert query_frame("commit with the message 'Bob fixed the login bug'") == (
        "commit with the message"
    )
    assert query_frame("Bob's laptop is in room 4") == "Bob's laptop is in room"
    # Nothing left out, or nothing left: no frame.
    assert query_frame("read the file and show it") is None
    assert query_frame("that: Alice") is None


def test_the_frame_is_embedded_last_and_told_apart_from_clauses() -> None:
    query = "find the report, then note that Alice read it"
    texts = embed_texts_for_query(query)
    assert texts == [
        query,
        "find the report",
        "note that Alice read it",
        "find the report, then note",
    ]
    vectors = [[float(i)] for i in range(len(texts))]
    assert split_clauses(query, vectors[1:]) == ([[1.0], [2.0]], [3.0])
    # Vectors of the clauses only (a caller that embedded no frame): all are clauses.
    assert split_clauses(query, vectors[1:3]) == ([[1.0], [2.0]], None)


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
