"""Capability identity: formatting, comments and docstrings never split a capability; semantics do."""

from __future__ import annotations

import pytest

from shared.capabilities.normalize import code_hash, normalize_code

BASE = """\
text = await mcp.fs.read(path=args.path)
lines = text.splitlines()
await mcp.memory.store(key="lines", value=len(lines))
return {"count": len(lines)}
"""


@pytest.mark.parametrize(
    "variant",
    [
        # Comments and blank lines.
        "# count the lines of a file\n\n"
        + BASE.replace("lines = text", "# split\nlines = text")
        + "# done\n",
        # Spacing, quotes, redundant parentheses, trailing commas, line continuation.
        """text = await mcp.fs.read( path = args.path )
lines = (text.splitlines())
await mcp.memory.store(
    key='lines',
    value=len(lines),
)
return { 'count' : len( lines ) }""",
        # A leading docstring and CRLF line endings.
        '"""Count lines."""\r\n' + BASE.replace("\n", "\r\n"),
        # A byte-order mark.
        "\ufeff" + BASE,
    ],
    ids=["comments", "layout", "docstring-crlf", "bom"],
)
def test_formatting_only_changes_keep_the_hash(variant: str) -> None:
    assert code_hash(variant) == code_hash(BASE)


def test_docstrings_of_nested_functions_are_ignored() -> None:
    with_doc = 'def f(x):\n    """Double x."""\n    return x * 2\nreturn f(args.n)\n'
    without = "def f(x):\n    return x * 2\nreturn f(args.n)\n"
    assert code_hash(with_doc) == code_hash(without)


def test_docstring_only_function_stays_valid_code() -> None:
    normalized = normalize_code('def f():\n    """Nothing."""\nreturn f()\n')
    compile(normalized.replace("return f()", "f()"), "<capability>", "exec")
    assert "pass" in normalized


@pytest.mark.parametrize(
    "variant",
    [
        BASE.replace('key="lines"', 'key="line_count"'),  # a string literal is data
        BASE.replace("args.path", "args.file"),  # another parameter
        BASE.replace("mcp.fs.read", "mcp.fs.read_text"),  # another tool
        BASE.replace("len(lines)}", "len(lines) + 1}"),  # another result
        BASE.replace("lines = text.splitlines()\n", "").replace(
            "len(lines)", "len(text)"
        ),  # another computation
    ],
    ids=["literal", "parameter", "tool", "result", "computation"],
)
def test_semantic_changes_change_the_hash(variant: str) -> None:
    assert code_hash(variant) != code_hash(BASE)


def test_a_lone_string_result_is_not_treated_as_a_docstring() -> None:
    # Sandbox code returns its last expression: "a" and "b" are different results.
    assert code_hash('"a"') != code_hash('"b"')


def test_unparseable_code_still_gets_a_stable_hash() -> None:
    broken = "def f(:\n    pass"
    assert code_hash(broken) == code_hash(broken + "   \n")
    assert code_hash(broken) != code_hash("def g(:\n    pass")
    assert len(code_hash(broken)) == 64
