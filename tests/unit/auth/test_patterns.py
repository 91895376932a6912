"""Tool allow-lists: which ids a pattern lets through, and bad patterns named clearly."""

from __future__ import annotations

import pytest

from shared.auth.grants import Grant
from shared.auth.patterns import (
    InvalidToolPattern,
    allowed_scope,
    check_pattern,
    compile_patterns,
)
from shared.auth.principal import Principal

IDS = [
    "time:get_current_time",
    "time:convert_time",
    "example:add",
    "example:add_note",
    "git:git_diff",
    "git:git_diff_staged",
    "my-server:get-sum",
]


@pytest.mark.parametrize(
    ("patterns", "allowed"),
    [
        (["time:*"], ["time:get_current_time", "time:convert_time"]),
        (["example:add"], ["example:add"]),  # exact: not a prefix
        (["example:add*"], ["example:add", "example:add_note"]),
        (["*:get_*"], ["time:get_current_time"]),
        (["git:git_?iff"], ["git:git_diff"]),
        (["my-server:get-sum"], ["my-server:get-sum"]),
        (["*"], IDS),
        (["*:*"], IDS),
        (["time:*", "example:add"], ["time:get_current_time", "time:convert_time", "example:add"]),
        ([], []),  # an empty allow-list allows nothing
    ],
)
def test_patterns_match_exactly_the_ids_they_describe(
    patterns: list[str], allowed: list[str]
) -> None:
    assert compile_patterns(patterns).filter(IDS) == allowed


def test_a_star_never_crosses_the_colon() -> None:
    matcher = compile_patterns(["t*:*"])
    assert matcher.allows("time:x") and not matcher.allows("example:t")
    assert not compile_patterns(["*:*e"]).allows("time:add")  # 'time' ends in e, 'add' does not
    assert compile_patterns(["*e:add"]).allows("example:add")


def test_malformed_ids_are_never_allowed() -> None:
    assert not compile_patterns(["*"]).allows("nocolon")
    assert not compile_patterns(["*"]).allows("a:b:c")


@pytest.mark.parametrize(
    "pattern",
    ["time", "time*", ":x", "time:", "a.b:*", "time:get/x", "ti me:*", "x" * 300 + ":*", "*:*:*"],
)
def test_bad_patterns_are_refused_naming_the_pattern_and_the_rule(pattern: str) -> None:
    with pytest.raises(InvalidToolPattern) as caught:
        check_pattern(pattern)
    error = caught.value.to_dict()
    assert error["type"] == "validation_error"
    assert repr(pattern[:200]) in error["message"]
    assert "tool patterns look like 'server:tool'" in error["message"]
    assert error["details"] == {"field": "tool_patterns", "pattern": pattern[:200]}
    with pytest.raises(InvalidToolPattern):
        compile_patterns(["time:*", pattern])


def test_scope_is_the_intersection_of_the_request_and_the_allow_list() -> None:
    assert allowed_scope(["time:convert_time", "example:add"], ["time:*"]) == (
        ["time:convert_time"],
        ["example:add"],
    )
    assert allowed_scope(["example:add"], ["time:*"]) == ([], ["example:add"])
    assert allowed_scope(["example:add"], None) == (["example:add"], [])
    assert allowed_scope(None, ["time:*"]) == (None, [])


def test_a_grant_combines_the_explicit_tools_and_the_patterns() -> None:
    key = Principal(tenant_id="t", key_id="k1", tool_patterns=("time:*",), tool_calls_per_min=5)
    anyone = Grant.for_principal(key, tools=None)
    assert anyone.allows("time:convert_time") and not anyone.allows("example:add")
    narrow = Grant.for_principal(key, tools=["time:convert_time"])
    assert narrow.allows("time:convert_time") and not narrow.allows("time:get_current_time")
    assert Grant.decode(narrow.encode()) == narrow
    assert narrow.rate_key == "key:k1"
    assert Grant(tenant_id="t").allows("example:add")  # the anonymous caller: every tool
    assert Grant(tenant_id="t").rate_key == "tenant:t"


def test_a_server_is_reachable_when_some_pattern_can_match_one_of_its_tools() -> None:
    patterns = compile_patterns(["time:*", "git*:status", "example:add"])
    assert patterns.allows_server("time")
    assert patterns.allows_server("github")
    assert patterns.allows_server("example")
    assert not patterns.allows_server("everything")
    assert compile_patterns(["*"]).allows_server("anything")
    assert not compile_patterns([]).allows_server("time")
