"""The gateway's TypeScript parse: clear errors in the agent's numbering, valid code untouched."""

from __future__ import annotations

import pytest

from shared.sandbox.typescript_syntax import find_typescript_syntax_error

# Valid for Deno (each was run): none may be refused, including syntax newer than the grammar.
VALID = {
    "types": "const a: number = 1;\nconst b = { a } satisfies Record<string, number>;\nreturn b;",
    "top-level await and return": "const r = await mcp.t.echo({ a: 1 });\nreturn r;",
    "using": "{ await using x = { async [Symbol.asyncDispose]() {} }; }",
    "decorators": "function d(t: any, c: any) { return t; }\n@d class K { @d m() {} }",
    "generics": "const f = <T,>(x: T): T => x;\nconst g = async <const T extends readonly unknown[]>(x: T) => x;",
    "variance, unknown to the grammar": "interface I<in out T> { x: T }\nreturn 1;",
    "enums and namespaces": "enum E { A = 1, B }\nnamespace N { export const x = 1; }\nreturn E.A + N.x;",
    "optional chaining": "const a: any = null;\nreturn a?.b?.[0]?.(1) ?? 2n;",
    "mapped types": "type M<T> = { -readonly [K in keyof T as `get${string & K}`]-?: () => T[K] };",
    "keywords as names": "let type = 1, async = 2, of = 3, declare = 4;\nreturn type + async + of + declare;",
    "unicode": "const café = 1;\nreturn café;",
}


@pytest.mark.parametrize("code", VALID.values(), ids=VALID.keys())
def test_valid_typescript_is_never_refused(code: str) -> None:
    assert find_typescript_syntax_error(code) is None


def test_an_error_names_the_agents_line_and_column() -> None:
    error = find_typescript_syntax_error("const a: number = 1;\nconst b = a +;\nreturn b;")
    assert error is not None and error["type"] == "syntax_error"
    assert error["details"] == {"line": 2, "column": 13, "text": "const b = a +;"}
    assert error["message"] == "SyntaxError at line 2, column 13: unexpected '+'"


def test_a_missing_token_is_named_and_columns_count_characters_not_bytes() -> None:
    error = find_typescript_syntax_error("const s = 'é€';\nconst x = (é;\nreturn x;")
    assert error is not None
    assert error["message"] == "SyntaxError at line 2, column 13: expected ')'"
    assert error["details"]["column"] == 13  # é is two bytes, one character


def test_errors_reaching_the_wrapper_or_inside_types_are_left_to_deno() -> None:
    # An unclosed or an extra `}` meets the function the code is wrapped in: Deno says which.
    assert find_typescript_syntax_error("if (true) {\nreturn 1;") is None
    assert find_typescript_syntax_error("return 1;\n}\nconst y = 2;") is None
    # Deno refuses these too, in the sandbox (the grammar cannot tell).
    assert find_typescript_syntax_error("import x from 'y';\nreturn x;") is None
