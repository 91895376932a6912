"""Inline capabilities in the real sandbox: nesting, trace events and graph edges, limits, errors, scope, lying children."""

from __future__ import annotations

from typing import Any

import pytest

from shared.executions.trace import summarize
from shared.graph.edges import derive_edges
from shared.graph.weights import EdgeKind
from shared.sandbox.bridge import CapabilitySource
from shared.sandbox.child.inline import MAX_DEPTH
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import LocalToolRegistry
from tests.integration.sandbox.conftest import Run


@pytest.fixture
def registry() -> LocalToolRegistry:
    """Distinct tools per level so ``contains`` edges show which capability made which call."""
    reg = LocalToolRegistry()
    for name in ("a", "b", "c", "echo"):
        reg.register(f"t:{name}", lambda **kw: kw)
    reg.register("t:fail", lambda: 1 / 0)
    return reg


def caps(**codes: str) -> dict[str, CapabilitySource]:
    """Capability sources named as given, with ids ``id-<name>``."""
    return {name: CapabilitySource(id=f"id-{name}", code=code) for name, code in codes.items()}


def events(outcome: ExecutionOutcome, kind: str) -> list[dict[str, Any]]:
    return [e for e in outcome.trace if e["type"] == kind]


NESTED = caps(
    a="x = await mcp.t.a(v=args.v)\ny = await capabilities.b(v=x['v'] + 1)\n{'a': x['v'], **y}",
    b="x = await mcp.t.b(v=args.v)\ny = await capabilities.c(v=x['v'] + 1)\n{'b': x['v'], **y}",
    c="x = await mcp.t.c(v=args.v)\n{'c': x['v']}",
)


async def test_nested_capabilities_are_traced_with_parents_and_teach_edges(run: Run) -> None:
    outcome = await run("await capabilities.a(v=1)", capability_sources=NESTED)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"a": 1, "b": 2, "c": 3}

    starts = events(outcome, "capability_start")
    assert [(s["capability_id"], s["name"], s["parent"]) for s in starts] == [
        ("id-a", "a", None),
        ("id-b", "b", "id-a"),
        ("id-c", "c", "id-b"),
    ]
    ends = {e["call_id"]: e for e in events(outcome, "capability_end")}
    for start in starts:
        end = ends[start["call_id"]]
        assert end["ok"] is True and end["error"] is None
        assert end["capability_id"] == start["capability_id"]
        assert end["parent"] == start["parent"]
        assert isinstance(start["ts"], float) and end["ts"] >= start["ts"]
        assert end["duration_ms"] >= 0
    # Inner calls finish inside outer ones.
    assert ends[starts[0]["call_id"]]["duration_ms"] >= ends[starts[2]["call_id"]]["duration_ms"]

    tool_parents = {e["tool"]: e["parent"] for e in events(outcome, "tool_start")}
    assert tool_parents == {"t:a": "id-a", "t:b": "id-b", "t:c": "id-c"}

    edges = {(e.kind, e.src, e.dst) for e in derive_edges(summary=summarize(outcome.trace))}
    assert {(EdgeKind.CALLS, "cap:id-a", "cap:id-b"), (EdgeKind.CALLS, "cap:id-b", "cap:id-c")} <= (
        edges
    )
    assert {
        (EdgeKind.CONTAINS, "cap:id-a", "t:a"),
        (EdgeKind.CONTAINS, "cap:id-b", "t:b"),
        (EdgeKind.CONTAINS, "cap:id-c", "t:c"),
    } <= edges
    assert not any(kind == EdgeKind.CALLS and dst == "cap:id-a" for kind, _, dst in edges)


async def test_capability_events_reach_the_live_callback(run: Run) -> None:
    seen: list[dict[str, Any]] = []
    outcome = await run(
        "await capabilities.a(v=1)", capability_sources=NESTED, on_event=seen.append
    )
    assert outcome.status == "succeeded", outcome.error
    kinds = [e["type"] for e in seen if e["type"].startswith("capability_")]
    assert kinds.count("capability_start") == 3 and kinds.count("capability_end") == 3


async def test_gather_inside_a_capability_keeps_each_callee_as_parent(run: Run) -> None:
    sources = caps(
        fan="import asyncio\nawait asyncio.gather(capabilities.b(), capabilities.c())",
        b="await mcp.t.b()",
        c="await mcp.t.c()",
    )
    outcome = await run("await capabilities.fan()\nawait mcp.t.echo()", capability_sources=sources)
    assert outcome.status == "succeeded", outcome.error
    parents = {s["name"]: s["parent"] for s in events(outcome, "capability_start")}
    assert parents == {"fan": None, "b": "id-fan", "c": "id-fan"}
    tool_parents = {e["tool"]: e["parent"] for e in events(outcome, "tool_start")}
    assert tool_parents == {"t:b": "id-b", "t:c": "id-c", "t:echo": None}


async def test_cycle_is_refused_naming_the_chain(run: Run) -> None:
    sources = caps(a="await capabilities.b()", b="await capabilities.a()")
    outcome = await run("await capabilities.a()", capability_sources=sources)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "capability_cycle"
    assert outcome.error["message"] == "capability cycle: a -> b -> a"
    assert "<capability:b>" in outcome.error["traceback"]
    # Both running capabilities end failed with the cycle; the refused call never started.
    ends = events(outcome, "capability_end")
    assert [(e["name"], e["ok"], e["error"]["type"]) for e in ends] == [
        ("b", False, "capability_cycle"),
        ("a", False, "capability_cycle"),
    ]
    assert len(events(outcome, "capability_start")) == 2

    self_call = await run(
        "await capabilities.a()", capability_sources=caps(a="await capabilities.a()")
    )
    assert self_call.error is not None and self_call.error["type"] == "capability_cycle"
    assert self_call.error["message"] == "capability cycle: a -> a"


async def test_depth_limit(run: Run) -> None:
    names = [f"c{i}" for i in range(MAX_DEPTH + 1)]
    chain = {
        name: f"await capabilities.{names[i + 1]}()" if i + 1 < len(names) else "'bottom'"
        for i, name in enumerate(names)
    }
    too_deep = await run("await capabilities.c0()", capability_sources=caps(**chain))
    assert too_deep.status == "failed"
    assert too_deep.error is not None and too_deep.error["type"] == "capability_depth_exceeded"
    assert too_deep.error["message"] == (
        f"capability depth limit of {MAX_DEPTH} exceeded: " + " -> ".join(names)
    )
    assert len(events(too_deep, "capability_start")) == MAX_DEPTH

    # Exactly MAX_DEPTH levels is allowed.
    ok = await run("await capabilities.c1()", capability_sources=caps(**chain))
    assert ok.status == "succeeded", ok.error
    assert ok.result == "bottom"


async def test_unknown_capability_lists_the_available_names(run: Run) -> None:
    sources = caps(a="await capabilities.nope()", b="1")
    outcome = await run("await capabilities.a()", capability_sources=sources)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert "no capability named 'nope'" in outcome.error["message"]
    assert "available: a, b" in outcome.error["message"]
    assert "<capability:a>" in outcome.error["traceback"]


async def test_args_and_return_values_pass_as_plain_python(run: Run) -> None:
    sources = caps(
        shape="{'n': args.n * 2, 'deep': args.cfg.k, 'dflt': args.get('missing', 'd'), "
        "'keys': sorted(args)}",
        make_set="{1, 2, 3}",  # not JSON: inline calls pass objects, no serialisation
        noargs="return 'nothing'",
    )
    code = (
        "r = await capabilities.shape(n=21, cfg={'k': [1, 2]})\n"
        "s = await capabilities.make_set()\n"
        "[r, len(s), await capabilities.noargs(), await capabilities['noargs']()]"
    )
    outcome = await run(code, capability_sources=sources)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == [
        {"n": 42, "deep": [1, 2], "dflt": "d", "keys": ["cfg", "n"]},
        3,
        "nothing",
        "nothing",
    ]
    positional = await run("await capabilities.noargs(1)", capability_sources=sources)
    assert positional.error is not None and "keyword arguments only" in positional.error["message"]


async def test_nested_exception_surfaces_with_traceback(run: Run) -> None:
    sources = caps(
        a="x = 1\nawait capabilities.b(v=x)",
        b="def check(v):\n    raise ValueError(f'bad value {v}')\n\ncheck(args.v)",
    )
    outcome = await run("y = 0\nawait capabilities.a()", capability_sources=sources)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert outcome.error["message"] == "ValueError: bad value 1"
    tb = outcome.error["traceback"]
    assert 'File "<agent-code>", line 2' in tb
    assert 'File "<capability:a>", line 2' in tb
    assert 'File "<capability:b>", line 4' in tb and 'File "<capability:b>", line 2, in check' in tb
    assert "raise ValueError(f'bad value {v}')" in tb
    assert "shared/sandbox" not in tb
    ends = {e["name"]: e for e in events(outcome, "capability_end")}
    assert ends["b"]["ok"] is False and ends["b"]["error"]["message"] == "ValueError: bad value 1"
    assert ends["a"]["ok"] is False

    # A caller can catch a callee's exception and carry on, like any function call.
    caught = await run(
        "try:\n    await capabilities.b(v=2)\nexcept ValueError as e:\n    r = str(e)\nr",
        capability_sources=sources,
    )
    assert caught.status == "succeeded", caught.error
    assert caught.result == "bad value 2"


async def test_tools_inside_capabilities_obey_the_tool_scope(run: Run) -> None:
    sources = caps(leak="await mcp.secrets.dump()", fail="await mcp.t.fail()")
    outcome = await run("await capabilities.leak()", capability_sources=sources)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "tool_not_allowed"
    (end,) = events(outcome, "tool_end")
    assert end["tool"] == "secrets:dump" and end["parent"] == "id-leak" and end["ok"] is False
    (cap_end,) = events(outcome, "capability_end")
    assert cap_end["ok"] is False and cap_end["error"]["type"] == "tool_not_allowed"

    failing = await run("await capabilities.fail()", capability_sources=sources)
    assert failing.error is not None and failing.error["type"] == "tool_error"


_RAW = """
import json, os, struct, time
body = json.dumps({frame}).encode()
os.write(3, struct.pack(">I", len(body)) + body)  # fd 3 is the channel
time.sleep(0.5)
"""


@pytest.mark.parametrize(
    "frame",
    [
        # unknown capability name
        '{"op": "capability_events", "events": [["s", 1, "ghost", None, time.time_ns() // 1000]]}',
        # parent not in the injected set
        '{"op": "capability_events", "events": [["s", 1, "a", "ghost", time.time_ns() // 1000]]}',
        # end of a call never started
        '{"op": "capability_events", "events": [["e", 7, 1000, None]]}',
        # malformed event
        '{"op": "capability_events", "events": [["s", "x"]]}',
        '{"op": "capability_events", "events": "nope"}',
        # tool call claiming a parent capability that was not injected
        '{"op": "tool_call", "id": 5, "tool": "t:echo", "parent": "cap-forged", "args": {}}',
    ],
)
async def test_lying_child_frames_are_protocol_errors(run: Run, frame: str) -> None:
    outcome = await run(_RAW.format(frame=frame), capability_sources=caps(a="1"))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == "protocol_error", outcome.error
    assert "ghost" not in str(outcome.trace) and "cap-forged" not in str(outcome.trace)


async def test_child_timestamps_are_clamped_to_the_execution(run: Run) -> None:
    frame = (
        '{"op": "capability_events", "events": [["s", 1, "a", None, 1.0], '
        '["e", 1, 10**15, {"type": "made_up", "message": "m"}]]}'
    )
    outcome = await run(_RAW.format(frame=frame) + "'ok'", capability_sources=caps(a="1"))
    assert outcome.status == "succeeded", outcome.error
    (start,) = events(outcome, "capability_start")
    (end,) = events(outcome, "capability_end")
    # Both inside the run, not 1970 and not 30 years after it started.
    assert outcome.duration_ms / 1000 + 1 > end["ts"] - start["ts"] >= 0
    assert start["ts"] > 1e9 and end["duration_ms"] <= (end["ts"] - start["ts"]) * 1000 + 1
    assert end["error"]["type"] == "runtime_error"  # unknown types are not passed through


async def test_exception_with_broken_str_still_ends_the_run_cleanly(run: Run) -> None:
    code = (
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()"
    )
    outcome = await run("await capabilities.a()", capability_sources=caps(a=code))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["message"] == "E: <unprintable exception>"
    (end,) = events(outcome, "capability_end")
    assert end["ok"] is False and end["error"]["message"] == "E: <unprintable exception>"
