"""Finding the capabilities a piece of code calls, so only those are injected."""

from __future__ import annotations

from shared.capabilities.references import referenced_capabilities


def test_attribute_calls_are_found() -> None:
    code = "a = await capabilities.fetch_page(url=args.url)\nreturn await capabilities.summarize(text=a)"
    assert referenced_capabilities(code) == {"fetch_page", "summarize"}


def test_getattr_with_a_literal_name_is_found() -> None:
    assert referenced_capabilities('f = getattr(capabilities, "x")\nreturn await f()') == {"x"}


def test_other_objects_and_broken_code_give_nothing() -> None:
    assert referenced_capabilities("return mcp.capabilities.list()") == set()
    assert referenced_capabilities("return (") == set()
