"""The execution contract: results, tracebacks, print, progress, args, capabilities, layers, fail-closed."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from shared.sandbox.bridge import CapabilitySource, run_in_sandbox
from shared.sandbox.launcher import get_launcher
from tests.integration.sandbox.conftest import Run

EXPECTED_LAYERS = {
    "fresh_interpreter", "clean_env", "filesystem_view", "unprivileged_user", "namespaces",
    "private_tmp", "fresh_proc", "rlimits", "capabilities_dropped", "no_new_privs", "landlock",
    "seccomp", "cgroup",
}  # fmt: skip


async def test_every_isolation_layer_is_active(run: Run) -> None:
    outcome = await run("None")
    assert outcome.status == "succeeded", outcome.error
    assert set(outcome.layers) >= EXPECTED_LAYERS
    assert all(outcome.layers[name] for name in EXPECTED_LAYERS), outcome.layers
    assert outcome.layers["landlock"] >= 1


async def test_return_and_last_expression(run: Run) -> None:
    assert (await run("x = 2\nreturn x * 21")).result == 42
    assert (await run("x = 2\nx * 21")).result == 42
    assert (await run("x = 1")).result is None
    assert (await run("import asyncio\nawait asyncio.sleep(0)\n{'a': [1, 2]}")).result == {
        "a": [1, 2]
    }


async def test_exception_traceback_shows_only_user_lines(run: Run) -> None:
    code = "def inner():\n    raise ValueError('bad input')\n\nx = 1\ninner()"
    outcome = await run(code)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert outcome.error["message"] == "ValueError: bad input"
    tb = outcome.error["traceback"]
    assert "line 5, in <module>" in tb and "line 2, in inner" in tb
    assert "raise ValueError('bad input')" in tb
    assert "shared/sandbox" not in tb and "asyncio" not in tb


async def test_syntax_error_is_reported_with_its_line_and_column(run: Run) -> None:
    outcome = await run("x = 1\ny = (1,\n")
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "syntax_error"
    assert "SyntaxError" in outcome.error["message"]
    assert outcome.error["details"]["line"] == 2 and outcome.error["details"]["column"] == 5


async def test_indentation_error_is_a_syntax_error_at_the_users_line(run: Run) -> None:
    outcome = await run("x = 1\nif x:\nreturn x\n")
    assert outcome.error is not None and outcome.error["type"] == "syntax_error"
    assert outcome.error["message"].startswith("IndentationError at line 3")
    assert outcome.error["details"]["line"] == 3


async def test_a_syntax_error_the_code_raises_at_run_time_stays_a_runtime_error(run: Run) -> None:
    outcome = await run("compile('x x', 'inner', 'exec')")
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"


async def test_a_result_that_is_not_json_fails_naming_where_and_what(run: Run) -> None:
    outcome = await run("{'a': [1, 2, {3}]}")
    assert outcome.status == "failed" and outcome.result is None
    assert outcome.error is not None and outcome.error["type"] == "result_not_json"
    assert outcome.error["message"].startswith("result['a'][2] is a set")
    assert outcome.error["details"] == {"path": "result['a'][2]", "python_type": "set"}


async def test_non_json_results_are_refused_not_stringified(run: Run) -> None:
    cases = {
        "{1, 2, 3}": "set",
        "b'raw'": "bytes",
        "float('nan')": "float",
        "import datetime\ndatetime.date(2024, 1, 2)": "date",
        "class Point: pass\nPoint()": "Point",
        "{(1, 2): 'pair'}": "tuple",
    }
    for code, python_type in cases.items():
        outcome = await run(code)
        assert outcome.error is not None and outcome.error["type"] == "result_not_json", code
        assert outcome.error["details"]["python_type"] == python_type


async def test_json_results_by_the_documented_rule(run: Run) -> None:
    outcome = await run("import collections\n{'t': (1, 2), 2: collections.Counter('aa')}")
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"t": [1, 2], "2": {"a": 2}}


async def test_a_cyclic_result_is_refused_at_the_depth_limit(run: Run) -> None:
    outcome = await run("x = []\nx.append(x)\nx")
    assert outcome.error is not None and outcome.error["type"] == "output_limit"
    assert "nests deeper than 64 levels" in outcome.error["message"]


async def test_print_is_captured(run: Run) -> None:
    outcome = await run("print('hello')\nimport sys\nprint('err', file=sys.stderr)\n1")
    assert outcome.stdout == "hello\nerr\n"
    assert outcome.stdout_truncated is False


async def test_progress_events_reach_the_callback(run: Run) -> None:
    events: list[dict[str, Any]] = []
    outcome = await run(
        "progress('half', done=1, total=2)\nprogress('all')", on_event=events.append
    )
    assert outcome.status == "succeeded", outcome.error
    progress = [e for e in events if e["type"] == "progress"]
    assert [(p["message"], p["done"], p["total"]) for p in progress] == [
        ("half", 1, 2),
        ("all", None, None),
    ]


async def test_args_support_item_get_and_attribute_access(run: Run) -> None:
    code = "[args['path'], args.get('missing', 'dflt'), args.path, args.nested.k]"
    outcome = await run(code, args={"path": "/x", "nested": {"k": 3}})
    assert outcome.result == ["/x", "dflt", "/x", 3]


async def test_capabilities_run_inline_and_parent_their_tool_calls(run: Run) -> None:
    caps = {
        "double": CapabilitySource(id="cap-1", code="r = await mcp.t.echo(v=args.n)\nr['v'] * 2")
    }
    outcome = await run("await capabilities.double(n=21)", capability_sources=caps)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == 42
    tool_events = [e for e in outcome.trace if e["type"].startswith("tool_")]
    assert tool_events and all(e["parent"] == "cap-1" for e in tool_events)
    missing = await run("await capabilities.nope()")
    assert missing.error is not None and "no capability named 'nope'" in missing.error["message"]


async def test_missing_layer_fails_closed_unless_degraded(limits, caplog) -> None:
    launcher = get_launcher()
    original = launcher.spawn

    async def spawn_without_seccomp(lim: Any, language: Any = "python") -> Any:
        proc = await original(lim, language)
        proc.layers["seccomp"] = False  # simulate a host where the filter could not load
        proc.errors["seccomp"] = "simulated"
        return proc

    launcher.spawn = spawn_without_seccomp  # type: ignore[method-assign,assignment]
    try:
        refused = await run_in_sandbox(code="1", limits=limits)
        assert refused.status == "failed"
        assert refused.error is not None and refused.error["type"] == "sandbox_unavailable"
        assert "seccomp" in refused.error["message"]
        with caplog.at_level(logging.WARNING):
            degraded = await run_in_sandbox(code="1", limits=replace(limits, degraded_ok=True))
        assert degraded.status == "succeeded"
        assert any(
            "SANDBOX DEGRADED" in r.message and "seccomp" in r.message for r in caplog.records
        )
    finally:
        del launcher.spawn  # type: ignore[method-assign]
