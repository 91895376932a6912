"""The error analysis' per-request rows (issue 31, round six): pure, small data."""

from __future__ import annotations

from research.search.errors import by_server, error_rows
from research.search.fit import Judged
from shared.search.graph_signals import GraphScores
from shared.search.hybrid import Evidence


def _judged(dense: dict[str, float], gold: str) -> Judged:
    evidence = Evidence(
        dense=dense,
        features={t: {} for t in dense},
        lexical={},
        graph=GraphScores(),
        pageranks={},
        clause_best={},
    )
    ranked = sorted(dense, key=lambda t: -dense[t])
    return Judged(evidence=evidence, gold=frozenset({gold}), dense=ranked)


def test_a_miss_names_what_won_and_where_the_expected_tool_fell() -> None:
    cosines = {"m:delete_entities": 0.67, "m:delete_observations": 0.66, "m:read_graph": 0.2}
    hit, miss = error_rows(
        [_judged(cosines, "m:delete_entities"), _judged(cosines, "m:delete_observations")],
        ["remove Bob", "delete the note about Bob"],
        key={},
    )
    assert hit["hit"] and hit["rank"] == 1
    assert not miss["hit"] and miss["rank"] == 2
    assert [t for t, _ in miss["top"]] == [
        "m:delete_entities",
        "m:delete_observations",
        "m:read_graph",
    ]
    assert miss["top"][0][1] > miss["top"][1][1]
    assert miss["dense_top1"] == "m:delete_entities" and not miss["dense_hit"]
    assert miss["request"] == "delete the note about Bob"


def test_an_expected_tool_outside_the_candidates_has_no_rank() -> None:
    (row,) = error_rows([_judged({"g:git_status": 0.4}, "f:directory_tree")], ["tree"], key={})
    assert row["rank"] is None and not row["hit"]


def test_hits_are_counted_per_server_of_the_expected_tool() -> None:
    assert by_server(["git", "memory", "git"], [1.0, 0.0, 0.0]) == {"git": "1/2", "memory": "0/1"}
