"""Generated capability names are readable, valid client tool names and Python identifiers."""

from __future__ import annotations

import keyword

import pytest

from shared.capabilities.naming import (
    NAME_RE,
    capability_description,
    capability_name,
    unique_name,
)


@pytest.mark.parametrize(
    ("intent", "tools", "expected"),
    [
        ("Read a file and store its line count", ["fs:read"], "read_file_store_line_count"),
        ("Analyser les commits de la semaine", [], "analyser_commits_semaine"),
        ("Résumé du déjeuner", [], "resume_dejeuner"),
        ("", ["github:list_commits", "memory:store"], "github_list_commits_memory_store"),
        ("2024 report", [], "_2024_report"),
        ("import", [], "_import"),
        ("!!!", [], "capability"),
    ],
)
def test_names_from_intent_or_tools(intent: str, tools: list[str], expected: str) -> None:
    assert capability_name(intent=intent, tools_used=tools) == expected


def test_long_intents_give_short_valid_identifiers() -> None:
    name = capability_name(intent="x" * 200 + " and more words here", tools_used=[])
    assert NAME_RE.match(name) and name.isidentifier() and not keyword.iskeyword(name)
    assert len(name) <= 64


def test_unique_name_appends_the_code_hash_within_the_limit() -> None:
    name = unique_name(name="a" * 64, code_hash="0123456789abcdef" * 4)
    assert name.endswith("_01234567") and len(name) == 64 and NAME_RE.match(name)


def test_description_is_the_intent_as_a_sentence_plus_tools() -> None:
    text = capability_description(
        intent="read a file", tools_used=["fs:read", "memory:store", "fs:read"]
    )
    assert text == "Read a file. Uses fs:read, memory:store."
    assert capability_description(intent="", tools_used=[]) == "Learned capability."
