"""TypeScript's pure pieces: the request field, per-language hashes and cache keys, references,
how a Deno exit without done becomes an error, and the Deno command line (no permission, no remote code)."""

from __future__ import annotations

import os
import signal

import pytest
from pydantic import ValidationError

from shared.cache.keys import execution_digest
from shared.capabilities.normalize import code_hash
from shared.capabilities.references import referenced_capabilities
from shared.executions.models import ExecutionRequest
from shared.sandbox.child import deno_child
from shared.sandbox.limits import DENO_ADDRESS_SPACE, SandboxLimits


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "python"),
        ("python", "python"),
        ("typescript", "typescript"),
        ("TypeScript", "typescript"),
        ("javascript", "typescript"),
        ("js", "typescript"),
    ],
)
def test_the_request_language_defaults_to_python_and_takes_javascript_as_typescript(
    given: str | None, expected: str
) -> None:
    body = {"code": "return 1"} | ({"language": given} if given else {})
    assert ExecutionRequest.model_validate(body).language == expected


def test_an_unknown_language_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="language"):
        ExecutionRequest.model_validate({"code": "1", "language": "ruby"})


def test_the_same_text_in_two_languages_is_two_capabilities_and_two_cache_entries() -> None:
    code = "return 1"
    assert code_hash(code) != code_hash(code, "typescript")
    assert code_hash(code) == code_hash(code, "python")  # existing rows keep their hash
    # Line endings and trailing blanks do not split a TypeScript capability; its text does.
    assert code_hash("return 1;\r\n", "typescript") == code_hash("return 1;  \n", "typescript")
    assert code_hash("return 1;", "typescript") != code_hash("return 2;", "typescript")
    python = execution_digest(code=code, args={}, scope="s")
    typescript = execution_digest(code=code, args={}, scope="s", language="typescript")
    assert python != typescript


def test_typescript_capability_references_are_found_by_pattern() -> None:
    code = (
        'const a = await capabilities.add_numbers({ a: 1 });\nawait capabilities["get-time"]({});'
    )
    assert referenced_capabilities(code, "typescript") == {"add_numbers", "get-time"}
    assert referenced_capabilities(code) == set()  # not Python


# What Deno 2.9 (V8 15) wrote to stderr when an endless promise chain filled its heap: the
# reason is "Ineffective mark-compacts near heap limit" when GC is slow (a loaded machine),
# "Reached heap limit" otherwise, so both must read as the memory limit.
INEFFECTIVE_MARK_COMPACTS = """<--- Last few GCs --->

[2:0x55f3e0b94000]     4960 ms: Mark-Compact 159.3 (161.2) -> 159.3 (161.2) MB, pooled: 0.0 MB, \
352.00 / 0.00 ms (average mu = 0.009, current mu = 0.000) allocation failure; scavenge might not succeed



#
# Fatal JavaScript out of memory: Ineffective mark-compacts near heap limit
#
==== C stack trace ===============================

    /usr/local/bin/deno(+0x28ad64e) [0x55f3b660164e]
"""


@pytest.mark.parametrize(
    "stderr",
    [
        INEFFECTIVE_MARK_COMPACTS,
        "#\n# Fatal JavaScript out of memory: Reached heap limit\n#",
        "#\n# Fatal JavaScript out of memory: MarkCompactCollector: young object promotion failed",
        "#\n# Fatal JavaScript out of memory: Scavenger: semi-space copy\n#",
        "#\n# Fatal process out of memory: Failed to reserve virtual memory for CodeRange\n#",
    ],
)
def test_every_fatal_out_of_memory_report_of_v8_is_the_memory_limit(stderr: str) -> None:
    for status in (133, 6, signal.SIGTRAP.value):  # V8's fatal exit, SIGABRT, SIGTRAP
        error = deno_child.failure_from_exit(status, stderr, 30)
        assert error["type"] == "memory_limit", error
        assert "AGENTCARDS_SANDBOX_MEMORY_MB" in error["message"]


def test_other_fatal_v8_errors_stay_runtime_errors_with_their_report() -> None:
    report = "#\n# Fatal JavaScript invalid size error 169220804\n#"
    error = deno_child.failure_from_exit(133 << 8, report, 30)
    assert error["type"] == "runtime_error" and "invalid size error" in error["message"]


def test_a_heap_limit_or_the_cpu_signal_is_named_as_that_limit() -> None:
    oom = deno_child.failure_from_exit(
        133, "#\n# Fatal JavaScript out of memory: Reached heap limit\n#", 30
    )
    assert oom["type"] == "memory_limit"
    status = signal.SIGXCPU.value  # a waitpid status for "killed by SIGXCPU"
    assert os.WIFSIGNALED(status)
    assert deno_child.failure_from_exit(status, "", 30)["type"] == "cpu_limit"
    threads = deno_child.failure_from_exit(
        6, "Deno could not start: unable to create worker threads.\nThis usually happens", 30
    )
    assert threads["type"] == "runtime_error" and "start fewer workers" in threads["message"]
    other = deno_child.failure_from_exit(3 << 8, "boom", 30)
    assert other["type"] == "runtime_error" and "boom" in other["message"]


def test_deno_is_run_with_no_permission_and_no_way_to_fetch_code() -> None:
    argv = deno_child.deno_argv("/x/deno", 160)
    assert not [a for a in argv if a.startswith(("--allow", "-A", "--unstable"))]
    for flag in ("--no-remote", "--no-npm", "--cached-only", "--no-config", "--no-prompt"):
        assert flag in argv
    assert "--v8-flags=--max-old-space-size=160" in argv
    env = deno_child.deno_env()
    assert env["DENO_DIR"].startswith("/tmp/")
    assert set(env) == {"DENO_DIR", "HOME", "DENO_NO_UPDATE_CHECK", "DENO_NO_PROMPT", "NO_COLOR"}


def test_v8_gets_its_address_space_and_a_heap_under_the_memory_cap() -> None:
    limits = SandboxLimits(memory_bytes=256 << 20)
    assert limits.deno_rlimits()["as"] == DENO_ADDRESS_SPACE
    assert {k: v for k, v in limits.deno_rlimits().items() if k != "as"} == {
        k: v for k, v in limits.rlimits().items() if k != "as"
    }
    assert limits.v8_heap_mb < 256


def test_a_typescript_capabilitys_parameters_are_inferred_from_its_args_and_tool_calls() -> None:
    from shared.capabilities.schema import infer_parameters_schema

    code = (
        'const now = await mcp.time.get_current_time({ timezone: args.tz ?? "UTC" });\n'
        "const r: number = await mcp.example.add({ a: args.a, b: 2 });\n"
        'const n = args["limit"] || 10;\n'
    )
    tools = {
        "example:add": {"properties": {"a": {"type": "number", "description": "first"}}},
        "time:get_current_time": {"properties": {"timezone": {"type": "string"}}},
    }
    schema = infer_parameters_schema(code=code, tool_schemas=tools, language="typescript")
    assert schema["required"] == ["a"]
    props = schema["properties"]
    assert props["a"]["type"] == "number" and props["a"]["description"] == "first"
    assert props["tz"]["type"] == "string" and props["tz"]["default"] == "UTC"
    assert props["limit"]["type"] == "integer" and props["limit"]["default"] == 10
    assert infer_parameters_schema(code="return 1;", tool_schemas={}, language="typescript") == {
        "type": "object",
        "properties": {},
    }


def test_typescript_tool_calls_are_found_by_pattern_resources_left_out() -> None:
    from shared.capabilities.schema import tools_called

    code = (
        'await mcp.time.get_current_time({});\nawait mcp["my-server"]["get-sum"]({ a: 1 });\n'
        'await mcp.docs.read_resource("file:///x");\nawait mcp.time.get_current_time({});'
    )
    assert tools_called(code, "typescript") == ["time:get_current_time", "my-server:get-sum"]


def test_a_bundle_made_before_languages_imports_as_python() -> None:
    from shared.capabilities.bundle import BundleCapability

    assert BundleCapability.model_fields["language"].default == "python"


async def test_without_the_deno_package_a_typescript_run_fails_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shared.sandbox import bridge, fsplan

    monkeypatch.setattr(fsplan, "find_deno", lambda: None)
    outcome = await bridge.run_in_sandbox(
        code="return 1;", limits=SandboxLimits(), language="typescript"
    )
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "sandbox_unavailable"
    assert "deno" in outcome.error["message"]
