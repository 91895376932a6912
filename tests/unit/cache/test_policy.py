"""The cacheability rules, one test per rule, and the keys."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.cache.config import AgentcardsBlock
from shared.cache.keys import entry_key, execution_digest, params_hash, scope_digest, tenant_of
from shared.cache.policy import (
    NO_TTL,
    Call,
    ToolPolicy,
    decide,
    tool_cache,
    tool_policy,
    writable_servers,
    written_servers,
)
from shared.cache.runs import Scope, may_store
from shared.config import Settings

READ = ToolPolicy(read_only=True, ttl_s=60)
POLICIES = {
    "files:read_text_file": READ,
    "files:write_file": ToolPolicy(read_only=False),
    "time:get_current_time": ToolPolicy(read_only=True, ttl_s=0),
    "time:convert_time": ToolPolicy(read_only=True),
    "files:short": ToolPolicy(read_only=True, ttl_s=30),
}


def _decide(*calls: Call, status: str = "succeeded", truncated: bool = False, **kw: object):
    return decide(status=status, stdout_truncated=truncated, calls=calls, policies=POLICIES,
                  default_ttl_s=300, read_only_ttl_s=0, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_read_only_tool_is_cached_only_for_a_ttl_the_operator_gave() -> None:
    decision = _decide(Call("files:read_text_file", True))
    assert decision.cacheable and decision.ttl_s == 60
    assert decision.servers == ("files",)
    unsaid = _decide(Call("time:convert_time", True))
    assert not unsaid.cacheable
    assert unsaid.reason == f"tool time:convert_time has {NO_TTL}"
    # One uncached tool keeps the whole run out, whatever the others allow.
    assert not _decide(
        Call("files:read_text_file", True), Call("time:convert_time", True)
    ).cacheable


def test_the_operators_blanket_read_only_ttl_covers_tools_without_their_own() -> None:
    kw = {"status": "succeeded", "stdout_truncated": False, "policies": POLICIES}
    decision = decide(calls=[Call("time:convert_time", True)], default_ttl_s=300,
                      read_only_ttl_s=45, **kw)  # type: ignore[arg-type]  # fmt: skip
    assert decision.cacheable and decision.ttl_s == 45
    assert not decide(calls=[Call("time:get_current_time", True)], default_ttl_s=300,
                      read_only_ttl_s=45, **kw).cacheable  # type: ignore[arg-type]  # fmt: skip


def test_an_operator_ttl_may_be_longer_than_the_read_only_default_not_the_level() -> None:
    policies = {**POLICIES, "files:stat": ToolPolicy(read_only=True, ttl_s=200)}
    kw = {"status": "succeeded", "stdout_truncated": False, "policies": policies}
    assert decide(calls=[Call("files:stat", True)], default_ttl_s=300, read_only_ttl_s=60,
                  **kw).ttl_s == 200  # type: ignore[arg-type]  # fmt: skip
    assert decide(calls=[Call("files:stat", True)], default_ttl_s=100, read_only_ttl_s=60,
                  **kw).ttl_s == 100  # type: ignore[arg-type]  # fmt: skip


def test_code_calling_no_tool_is_not_cached() -> None:
    decision = _decide()
    assert not decision.cacheable and "called no tool" in decision.reason


def test_what_tools_report_of_their_cache() -> None:
    assert tool_cache(ToolPolicy(read_only=True), read_only_ttl_s=0) == {
        "cached": False, "ttl_s": 0, "why": NO_TTL}  # fmt: skip
    assert tool_cache(ToolPolicy(read_only=True), read_only_ttl_s=60) == {
        "cached": True, "ttl_s": 60, "why": "AGENTCARDS_CACHE_READ_ONLY_TTL_S"}  # fmt: skip
    assert tool_cache(POLICIES["files:short"], read_only_ttl_s=0) == {
        "cached": True, "ttl_s": 30, "why": "operator ttl_s"}  # fmt: skip
    assert not tool_cache(POLICIES["time:get_current_time"], read_only_ttl_s=60)["cached"]
    assert tool_cache(POLICIES["files:write_file"], read_only_ttl_s=60)["why"] == "not read-only"


def test_only_succeeded_runs_are_cached() -> None:
    assert not _decide(Call("files:read_text_file", True), status="failed").cacheable


def test_a_truncated_stdout_is_never_cached() -> None:
    assert not _decide(Call("files:read_text_file", True), truncated=True).cacheable


def test_a_tool_that_is_not_read_only_is_never_cached() -> None:
    decision = _decide(Call("files:read_text_file", True), Call("files:write_file", True))
    assert not decision.cacheable and "not read-only" in decision.reason


def test_a_tool_configured_ttl_0_is_never_cached() -> None:
    assert not _decide(Call("time:get_current_time", True)).cacheable


def test_a_failed_or_lost_call_is_never_cached() -> None:
    assert not _decide(Call("files:read_text_file", False)).cacheable
    assert not _decide(Call("files:read_text_file", None)).cacheable


def test_an_unknown_tool_is_never_cached() -> None:
    assert not _decide(Call("other:thing", True)).cacheable


def test_the_smallest_tool_ttl_wins() -> None:
    assert _decide(Call("files:read_text_file", True), Call("files:short", True)).ttl_s == 30


def test_a_capability_may_opt_out_or_shorten_but_never_in() -> None:
    read = Call("files:read_text_file", True)
    assert not _decide(read, capability_config={"enabled": False}).cacheable
    assert not _decide(read, capability_config={"ttl_s": 0}).cacheable
    assert _decide(read, capability_config={"ttl_s": 10}).ttl_s == 10
    assert _decide(read, capability_config={"ttl_s": 10_000}).ttl_s == 60
    write = Call("files:write_file", True)
    assert not _decide(write, capability_config={"enabled": True}).cacheable


def test_read_only_comes_from_the_annotation_unless_overridden() -> None:
    assert tool_policy(annotations={"readOnlyHint": True}, override={}).read_only
    assert not tool_policy(annotations={}, override={}).read_only
    assert not tool_policy(
        annotations={"readOnlyHint": True}, override={"read_only": False}
    ).read_only
    assert tool_policy(annotations={}, override={"read_only": True, "ttl_s": 5}) == ToolPolicy(
        True, 5
    )


def test_writes_are_successful_or_lost_calls_to_non_read_only_tools() -> None:
    calls = [Call("files:read_text_file", True), Call("files:write_file", True)]
    assert written_servers(calls, POLICIES) == {"files"}
    assert written_servers([Call("files:write_file", False)], POLICIES) == set()
    assert written_servers([Call("files:write_file", None)], POLICIES) == {"files"}
    assert written_servers([Call("mystery:tool", True)], POLICIES) == {"mystery"}
    assert writable_servers(POLICIES) == {"files"}


def test_keys_ignore_formatting_and_key_order_but_not_args_schemas_or_tenants() -> None:
    scope = scope_digest({"files:read_text_file": "h1"})
    a = execution_digest(code="x = 1\nreturn x", args={"a": 1, "b": 2}, scope=scope)
    assert a == execution_digest(code="x=1  # same\nreturn x", args={"b": 2, "a": 1}, scope=scope)
    assert a != execution_digest(code="x = 1\nreturn x", args={"a": 2, "b": 2}, scope=scope)
    typescript = execution_digest(code="x = 1\nreturn x", args={"a": 1, "b": 2}, scope=scope,
                                  language="typescript")  # fmt: skip
    assert a != typescript  # the same text in another language is another program
    other = scope_digest({"files:read_text_file": "h2"})
    assert a != execution_digest(code="x = 1\nreturn x", args={"a": 1, "b": 2}, scope=other)
    assert params_hash({"a": 1}) != params_hash({"a": "1"})
    assert entry_key("t1", a) != entry_key("t2", a)
    assert tenant_of(entry_key("acme:eu", a)) == "acme:eu"


def test_the_agentcards_block_merges_server_and_tool_settings() -> None:
    block = AgentcardsBlock.model_validate(
        {
            "cache": {
                "ttl_s": 600,
                "tools": {"read_file": {"ttl_s": 30}, "log": {"read_only": False}},
            }
        }
    )
    assert block.cache_override("read_file") == {"ttl_s": 30}
    assert block.cache_override("log") == {"ttl_s": 600, "read_only": False}
    assert block.cache_override("other") == {"ttl_s": 600}


@pytest.mark.parametrize(
    "bad",
    [{"cache": {"ttl": 1}}, {"cache": {"ttl_s": -1}}, {"cache": {"ttl_s": "30"}},
     {"cache": {"tools": {"x": {"read_only": "no"}}}}, {"other": {}}],
)  # fmt: skip
def test_bad_keys_and_values_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AgentcardsBlock.model_validate(bad)


@pytest.mark.parametrize("read_only_ttl_s", [0, 45])
@pytest.mark.parametrize("level_ttl_s", [0, 300])
def test_a_direct_call_skips_the_lookup_only_when_no_run_of_its_tool_could_be_cached(
    read_only_ttl_s: int, level_ttl_s: int
) -> None:
    # may_store decides whether a direct call reads the cache and the generations at all;
    # it must say "could be stored" for every tool whose one successful call decide caches.
    settings = Settings(cache_ttl_s=level_ttl_s, cache_read_only_ttl_s=read_only_ttl_s)
    for tool, policy in POLICIES.items():
        scope = Scope(policies={tool: policy}, digest="d")
        cached = decide(status="succeeded", stdout_truncated=False, calls=[Call(tool, True)],
                        policies=POLICIES, default_ttl_s=level_ttl_s,
                        read_only_ttl_s=read_only_ttl_s).cacheable  # fmt: skip
        assert may_store(scope, settings=settings) is cached, (tool, policy)
    # An unknown tool (no row): no entry may answer it.
    assert not may_store(Scope(policies={}, digest="d"), settings=settings)
