"""In-memory lexical scoring: field weights, rare words first, ties by id, common words dropped."""

from __future__ import annotations

from typing import Any

import pytest

from shared.search.lexical import FIELD_WEIGHTS, WordIndex, build_index, idf


def _row(
    tool_id: str, words: list[str], name: tuple[str, ...] = (), server: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "id": tool_id,
        "words": sorted({*words, *name, *server}),
        "in_name": list(name),
        "in_name_or_server": [*name, *server],
    }


def _index() -> WordIndex:
    rows = [
        _row("a:pdf_maker", ["make"], name=("pdf", "maker"), server=("a",)),
        _row("b:convert", ["pdf", "convert"], name=("convert",), server=("b",)),
        _row("c:convert", ["pdf", "convert"], name=("convert",), server=("c",)),
        _row("pdf:tool", ["tool"], name=("tool",), server=("pdf",)),
    ]
    rows += [_row(f"z:filler{i}", ["file", "other"]) for i in range(16)]
    return build_index(rows=sorted(rows, key=lambda r: r["id"]))


def test_a_word_counts_most_in_the_name_then_the_server_then_the_description() -> None:
    index = _index()
    hits = index.search(words=["pdf"], limit=10)
    assert [h.id for h in hits] == ["a:pdf_maker", "pdf:tool", "b:convert", "c:convert"]
    weight = idf(total=20, frequency=4)
    assert [h.score for h in hits] == pytest.approx(
        [weight * FIELD_WEIGHTS[f] for f in ("A", "B", "C", "C")]
    )
    assert all(h.words == ["pdf"] for h in hits)


def test_equal_scores_rank_by_id_and_words_are_listed_rarest_first() -> None:
    hits = _index().search(words=["pdf", "convert", "missing"], limit=2)
    assert [h.id for h in hits] == ["b:convert", "c:convert"]
    assert hits[0].score == hits[1].score
    assert hits[0].words == ["convert", "pdf"]  # "convert" is in 2 tools, "pdf" in 4


def test_words_in_most_tools_are_ignored() -> None:
    # "file" is in 16 of 20 tools: past MAX_DOC_FRACTION, so it matches nothing.
    assert _index().search(words=["file"], limit=10) == []


def test_words_no_tool_holds_still_count_in_the_query_s_information() -> None:
    # "remember that Alice works at Acme": "work" (of "working directory") is the
    # one word the catalogue knows; it must not be the whole query's information.
    rows = [
        {**_row("fs:search", ["work", "directori"]), "in_description": ["work", "directori"]},
        {**_row("mem:add", ["observ", "entiti"]), "in_description": ["observ", "entiti"]},
    ]
    index = build_index(rows=rows)
    alone = index.coverage(words=["work"], ids=["fs:search"])["fs:search"]["description"]
    diluted = index.coverage(words=["rememb", "alic", "work", "acm"], ids=["fs:search", "mem:add"])
    assert alone == pytest.approx(1.0)
    assert diluted["fs:search"]["description"] < 0.25 and "mem:add" not in diluted
    assert index.matched(words=["rememb", "work"], ids=["fs:search", "mem:add"]) == {
        "fs:search": {"description": ["work"]}
    }
