"""Query clause splitting, lexeme cleaning and weighted reciprocal-rank fusion."""

from __future__ import annotations

from shared.search.fusion import explain
from shared.search.hybrid import embed_texts_for_query, frame_lifts, split_clauses
from shared.search.lexical import idf
from shared.search.query import (
    MAX_CLAUSES,
    asks_removal,
    lexeme_words,
    query_clauses,
    query_frame,
)


def test_multi_step_request_is_split_into_clauses() -> None:
    clauses = query_clauses(
        "Fetch the latest stock prices, draw a bar chart and then write a PDF report."
    )
    assert clauses == ["Fetch the latest stock prices", "draw a bar chart", "write a PDF report."]


def test_single_step_request_has_no_clauses() -> None:
    assert query_clauses("get the weather in Paris") == []
    assert len(query_clauses(", ".join(f"step number {i}" for i in range(10)))) == MAX_CLAUSES


def test_a_requests_frame_leaves_its_payload_out() -> None:
    # What follows "that", a colon or a dash becomes "this fact", quoted text "this text";
    # names and numbers go.
    assert query_frame("note that Priya moved to the Lisbon office") == "note this fact"
    assert query_frame("save: Bob is Carol's manager") == "save this fact"
    assert query_frame("make a note - the gate code is 2291") == "make a note this fact"
    assert query_frame("commit with the message 'Bob fixed the login bug'") == (
        "commit with the message this text"
    )
    # A request that states no payload has none: its names stay (they are what it acts on).
    assert query_frame("Bob's laptop is in room 4") is None
    assert query_frame("book a ride to SFO for 2 people") is None
    # A question's names are what it asks about: no frame, payload or not.
    assert query_frame("what is the Imjin war") is None
    assert query_frame("is it true that Alice works at Acme?") is None
    assert query_frame("the build that failed yesterday?") is None
    # Nothing left out, or no action left: no frame.
    assert query_frame("read the file and show it") is None
    assert query_frame("that: Alice") is None


def test_a_request_asks_for_removal_by_its_verb_unless_negated() -> None:
    for text in (
        "forget that Sam is vegetarian",
        "Delete the entity Bob",
        "get rid of the note about Carol",
        "erase what you know about Dave",
        "unstage the file",
    ):
        assert asks_removal(text), text
    for text in (
        "remember that Alice works at Acme",
        "don't forget that Eve prefers email",
        "never forget Eve's birthday",
        "create todo.txt",
    ):
        assert not asks_removal(text), text


def test_the_frame_lifts_no_tool_of_the_opposite_direction() -> None:
    frame_best = {"m:add": 0.3, "m:delete": 0.3, "m:search": 0.3, "x:unannotated": 0.3}
    direction = {"m:delete": "destructive", "m:search": "read_only"}
    # "remember this fact" is as near delete as add for MiniLM: without a removal asked
    # for, a destructive tool is not lifted; with one, a read-only tool is not.
    assert frame_lifts(frame_best, direction=direction, removal=False) == {
        "m:add",
        "m:search",
        "x:unannotated",
    }
    assert frame_lifts(frame_best, direction=direction, removal=True) == {
        "m:add",
        "m:delete",
        "x:unannotated",
    }


def test_the_frame_is_embedded_last_and_only_for_a_one_step_request() -> None:
    query = "note that Alice read the report"
    texts = embed_texts_for_query(query)
    assert texts == [query, "note this fact"]
    assert split_clauses(query, [[1.0]]) == ([], [1.0])
    # Vectors of the clauses only (a caller that embedded no frame): all are clauses.
    assert split_clauses(query, []) == ([], None)
    # A multi-step request's steps are its clauses; it has no frame.
    steps = "find the report, then note that Alice read it"
    assert query_frame(steps) is None
    assert embed_texts_for_query(steps) == [steps, "find the report", "note that Alice read it"]


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
