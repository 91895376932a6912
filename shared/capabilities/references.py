"""Which capabilities a piece of code calls as `capabilities.<name>(...)`, found with `ast`."""

from __future__ import annotations

import ast


def referenced_capabilities(code: str) -> set[str]:
    """Names used as `capabilities.<name>` (also `getattr(capabilities, "name")`); {} if unparsable."""
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
