"""AST normalization of sandbox code, so formatting, comments and docstrings never split a capability."""

from __future__ import annotations

import ast
import hashlib

# Bump when the normalization rules change: every hash changes with it, so old rows
# simply stop matching instead of colliding with differently-normalized code.
NORMALIZATION_VERSION = "1"


def normalize_code(code: str) -> str:
    """Canonical source text: parsed and unparsed (no comments, one layout), docstrings dropped.

    Raises SyntaxError for code that does not parse. String literals are kept (they
    are data); only docstrings go — the first string statement of a function or
    class body, and of the top level unless it is the only statement (sandbox code
    runs as an async function body whose last expression is the result, so a lone
    string there is a value, not a docstring).
    """
    tree = ast.parse(code.lstrip("\ufeff"))
    _strip_docstrings(tree)
    return ast.unparse(tree)


def code_hash(code: str, language: str = "python") -> str:
    """sha256 hex of the normalized code: the capability key (unique per tenant).

    TypeScript is hashed as its text (line endings and trailing blanks evened out) under
    its own prefix: the same text in two languages is two capabilities, never one.
    """
    if language != "python":
        canonical = f"{language}:" + _even_lines(code)
    else:
        try:
            canonical = "ast:" + normalize_code(code)
        except (SyntaxError, ValueError):
            # Unparseable code never ran successfully, so it is never learned; hashing the
            # raw text keeps this total.
            canonical = "raw:" + _even_lines(code)
    payload = f"v{NORMALIZATION_VERSION}\n{canonical}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _even_lines(code: str) -> str:
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _strip_docstrings(tree: ast.Module) -> None:
    if len(tree.body) > 1 and _is_docstring(tree.body[0]):
        del tree.body[0]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.body
            and _is_docstring(node.body[0])
        ):
            # A body cannot be empty; `pass` keeps a docstring-only function valid.
            node.body = node.body[1:] or [ast.Pass()]
