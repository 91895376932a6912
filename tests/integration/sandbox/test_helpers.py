"""Agent code finds the standard helpers (asyncio, json, ...) as globals, so execute_code's own example runs as written."""

from __future__ import annotations

import pytest

from shared.sandbox.bridge import CapabilitySource
from shared.sandbox.child.helpers import HELPER_MODULES
from shared.sandbox.tools import LocalToolRegistry
from tests.integration.sandbox.conftest import Run

# One use of each helper, with no import: name -> (expression, its value).
USES = {
    "asyncio": ("await asyncio.sleep(0, result='slept')", "slept"),
    "json": ("json.loads(json.dumps({'a': [1, 2]}))", {"a": [1, 2]}),
    "re": ("re.findall(r'\\d+', 'a1b22')", ["1", "22"]),
    "math": ("math.isqrt(17)", 4),
    "datetime": ("datetime.date(2026, 1, 2).isoformat()", "2026-01-02"),
    "itertools": ("list(itertools.chain([1], [2]))", [1, 2]),
    "collections": ("collections.Counter('aab')['a']", 2),
    "functools": ("functools.reduce(lambda a, b: a * b, [2, 3, 4])", 24),
    "statistics": ("statistics.median([3, 1, 2])", 2),
    "base64": ("base64.b64encode(b'hi').decode()", "aGk="),
    "time": ("time.time() > 0", True),
}


def test_every_helper_has_a_use_here() -> None:
    assert set(USES) == set(HELPER_MODULES)


async def test_the_description_example_runs_without_an_import(run: Run) -> None:
    # execute_code's description says: a, b = await asyncio.gather(mcp.x.f(), mcp.y.g())
    async def f() -> str:
        import asyncio

        await asyncio.sleep(0.3)
        return "from x"

    async def g() -> str:
        import asyncio

        await asyncio.sleep(0.3)
        return "from y"

    registry = LocalToolRegistry()
    registry.register("x:f", f)
    registry.register("y:g", g)
    code = "a, b = await asyncio.gather(mcp.x.f(), mcp.y.g())\nreturn [a, b]"
    outcome = await run(code, tools=registry.specs(), backend=registry)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == ["from x", "from y"]
    starts = [e["ts"] for e in outcome.trace if e["type"] == "tool_start"]
    ends = [e["ts"] for e in outcome.trace if e["type"] == "tool_end"]
    assert len(starts) == 2 and max(starts) < min(ends), "the calls did not overlap"


async def test_each_helper_name_works_without_an_import(run: Run) -> None:
    code = "return {\n" + "".join(f"    {name!r}: {expr},\n" for name, (expr, _) in USES.items())
    outcome = await run(code + "}")
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {name: value for name, (_, value) in USES.items()}


@pytest.mark.parametrize("name", ["json", "asyncio", "re"])
async def test_importing_a_helper_still_works_and_is_the_same_module(run: Run, name: str) -> None:
    outcome = await run(
        f"import {name} as imported\nreturn imported is {name} and imported.__name__"
    )
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == name


async def test_capabilities_see_the_helpers_too(run: Run) -> None:
    caps = {"dump": CapabilitySource(id="cap-dump", code="json.dumps(sorted(args.keys()))")}
    outcome = await run("await capabilities.dump(b=1, a=2)", capability_sources=caps)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == '["a", "b"]'


async def test_a_helper_name_can_be_rebound_by_the_code(run: Run) -> None:
    outcome = await run("json = {'mine': True}\nreturn json")
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"mine": True}


async def test_tool_call_error_is_a_global_to_catch_by_name(run: Run) -> None:
    code = "try:\n    await mcp.t.fail()\nexcept ToolCallError as e:\n    return [e.type, e.tool]"
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == ["tool_error", "t:fail"]
