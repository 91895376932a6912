"""Which capabilities a piece of code calls as `capabilities.<name>(...)`: Python with `ast`, TypeScript by pattern."""

from __future__ import annotations

import ast
import re

# `capabilities.name` or `capabilities["name"]` / `capabilities['name']` in TypeScript. Without
# a parser this may over-match (a name in a comment): an extra name only loads one more
# capability of the tenant's, never runs one the code does not call.
_TS_REFERENCE = re.compile(
    r"\bcapabilities\s*(?:\?\.|\.)\s*([A-Za-z_$][\w$]*)|\bcapabilities\s*\[\s*([\"'])([^\"'\\]+)\2\s*\]"
)


def referenced_capabilities(code: str, language: str = "python") -> set[str]:
    """Names used as `capabilities.<name>` (also `getattr(capabilities, "name")`); {} if unparsable."""
    if language != "python":
        return {m.group(1) or m.group(3) for m in _TS_REFERENCE.finditer(code)}
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "capabilities"
        ):
            names.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "capabilities"
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            names.add(node.args[1].value)
    return names
