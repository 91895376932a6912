"""The gateway's cheap parse of TypeScript: a syntax error refused before the run is queued.

Python is parsed at submission with ``ast`` (``shared.sandbox.child.usercode``); this is
the same for TypeScript, with tree-sitter's TypeScript grammar (wheels, no download,
~0.1 ms for agent-sized code). The code is parsed as the sandbox runs it, the body of an
``async function`` (``await`` and ``return`` at its top level are fine), and the error
is given in the agent's own numbering: ``line`` and ``column`` (1-based, in characters).

Deno's parser (swc) is the judge, and the grammar lags TypeScript's newest type syntax
(variance annotations ``<in out T>`` are an error to it), so this only refuses what is
clearly broken: an error inside a type (annotations, parameters, interfaces, aliases) or
one that reaches the wrapper's own lines (an unclosed or extra ``}``) is left to the
sandbox, which reports it as ``syntax_error`` too. A false refusal would stop valid code
with no way round it; a miss only costs a queued run.
"""

from __future__ import annotations

import functools
from typing import Any

import tree_sitter
import tree_sitter_typescript

from shared.errors import ErrorType, error_dict

HEADER = "export default async function (args: any) {\n"  # as the prelude wraps the code
FOOTER = "\n}\n"
_MAX_MESSAGE_CHARS = 4000
# Nodes whose syntax the grammar may not know yet: an error inside one is Deno's to judge.
_TYPE_NODES = frozenset(
    {
        "type_annotation",
        "type_parameters",
        "type_parameter",
        "type_arguments",
        "interface_declaration",
        "type_alias_declaration",
        "abstract_class_declaration",
        "ambient_declaration",
        "enum_declaration",
        "internal_module",
        "class_heritage",
        "implements_clause",
        "asserts_annotation",
        "opting_type_annotation",
        "omitting_type_annotation",
        "adding_type_annotation",
        "satisfies_expression",
        "as_expression",
        "decorator",
    }
)


@functools.cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript()))


def find_typescript_syntax_error(code: str) -> dict[str, Any] | None:
    """The ``syntax_error`` for ``code`` that clearly does not parse, else None (runs nothing)."""
    source = (HEADER + code + FOOTER).encode("utf-8", "surrogatepass")
    try:
        tree = _parser().parse(source)
    except (ValueError, MemoryError):  # too odd to judge here: the sandbox will
        return None
    if not tree.root_node.has_error:
        return None
    node = _first_error(tree.root_node)
    if node is None or _in_type(node):
        return None
    lines = code.split("\n")
    row, byte_column = node.start_point.row, node.start_point.column
    if row < 1 or row > len(lines) or node.end_point.row > len(lines):
        return None  # reaches the wrapper's lines: unbalanced braces, Deno says which
    line_bytes = source.split(b"\n")[row]
    column = len(line_bytes[:byte_column].decode("utf-8", "replace")) + 1
    text = lines[row - 1]
    if node.is_missing:
        what = f"expected '{node.type}'"
    else:
        token = _first_token(node, source)
        what = f"unexpected '{token}'" if token else "unexpected end of input"
    message = f"SyntaxError at line {row}, column {column}: {what}"
    details = {"line": row, "column": column, "text": text[:200]}
    return error_dict(ErrorType.SYNTAX_ERROR, message[:_MAX_MESSAGE_CHARS], details=details)


def _first_error(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """The first ERROR or MISSING node in source order (iterative: code may nest deeply)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        if node.has_error:
            stack.extend(reversed(node.children))
    return None


def _in_type(node: tree_sitter.Node) -> bool:
    parent: tree_sitter.Node | None = node
    while parent is not None:
        if parent.type in _TYPE_NODES:
            return True
        # A child of the error that is a type says the same: `<in out T>` seen as an error.
        parent = parent.parent
    return any(child.type in _TYPE_NODES for child in node.children)


def _first_token(node: tree_sitter.Node, source: bytes) -> str:
    leaf = node
    while leaf.children:
        leaf = leaf.children[0]
    text = source[leaf.start_byte : leaf.end_byte] or source[node.start_byte : node.end_byte]
    return text.decode("utf-8", "replace").split("\n")[0][:40]
