"""Twins: two pieces of code with one call signature (the same tools, in the same order, passed
the same parameters from the same sources) do one job; anything else is another job."""

from __future__ import annotations

from shared.capabilities.schema import call_signature

FIRST_LINE = 'now = await mcp.time.get_current_time(timezone=args["tz"])\nreturn str(now)[:10]'
PLUS_FIRST = (
    '"""Current time in a zone, first line."""\n'
    'reply = await mcp.time.get_current_time(timezone=args.get("zone", "UTC"))\n'
    "lines = str(reply).splitlines()\nreturn lines[0]"
)


def test_other_code_calling_the_same_tool_with_the_same_parameter_is_a_twin() -> None:
    assert call_signature(FIRST_LINE) == call_signature(PLUS_FIRST)
    assert call_signature(FIRST_LINE) == (("time:get_current_time", (("timezone", "arg"),)),)


def test_another_order_parameter_or_source_is_another_job() -> None:
    twice = "a = await mcp.time.get_current_time(timezone=args['tz'])\n"
    convert = "b = await mcp.time.convert_time(source_timezone=args['tz'], time='12:00')\n"
    assert call_signature(twice + convert) != call_signature(convert + twice)
    constant = "return await mcp.time.get_current_time(timezone='UTC')"
    assert call_signature(constant) != call_signature(FIRST_LINE)  # a fixed zone, not the caller's
    assert call_signature("return await mcp.time.get_current_time()") != call_signature(constant)


def test_typescript_reads_the_same_way() -> None:
    ts = "const now = await mcp.time.get_current_time({ timezone: args.tz });\nreturn now;"
    assert call_signature(ts, "typescript") == call_signature(FIRST_LINE)
    fixed = "return await mcp.time.get_current_time({ timezone: 'UTC' });"
    assert call_signature(fixed, "typescript") == call_signature(
        "return await mcp.time.get_current_time(timezone='UTC')"
    )


def test_code_that_does_not_parse_or_calls_no_tool_has_no_signature() -> None:
    assert call_signature("return (") == ()
    assert call_signature("return 1 + 1") == ()
