"""Turns agent code into an async function (top-level await, last-expression result) and formats its tracebacks."""

from __future__ import annotations

import ast
import inspect
import traceback
import types
from collections.abc import Callable, Coroutine
from typing import Any

from shared.errors import ErrorType, error_dict

MAIN_FILENAME = "<agent-code>"
_FN_NAME = "__agentcards_main__"
_MAX_TRACEBACK_CHARS = 16_000
_MAX_MESSAGE_CHARS = 4_000


def capability_filename(name: str) -> str:
    """Pseudo-filename for a capability's code, so its frames count as user frames."""
    return f"<capability:{name}>"


def compile_body(
    source: str, namespace: dict[str, Any], filename: str = MAIN_FILENAME
) -> Callable[[], Coroutine[Any, Any, Any]]:
    """An ``async def`` whose body is ``source``; a trailing expression becomes its return value.

    Line numbers stay those of ``source`` (the wrapper reuses the parsed nodes), so
    tracebacks point at the agent's own lines. Raises SyntaxError.
    """
    return types.FunctionType(compile_code(source, filename), namespace, _FN_NAME)


def compile_code(source: str, filename: str = MAIN_FILENAME) -> types.CodeType:
    """The code object of that ``async def``: compiled once, bound to fresh globals per call."""
    tree = ast.parse(source, filename, mode="exec")
    body: list[ast.stmt] = list(tree.body)
    if body and isinstance(body[-1], ast.Expr):
        last = body[-1]
        body[-1] = ast.copy_location(ast.Return(value=last.value), last)
    if not body:
        body = [ast.Pass(lineno=1, col_offset=0)]
    fn = ast.AsyncFunctionDef(
        name=_FN_NAME,
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        lineno=1,
        col_offset=0,
    )
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    module_code = compile(module, filename, "exec", dont_inherit=True)
    code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
    if code.co_flags & inspect.CO_ASYNC_GENERATOR:
        raise SyntaxError(
            "'yield' is not allowed at the top level of agent code", (filename, 1, 1, "")
        )
    return code


def syntax_error(exc: SyntaxError) -> dict[str, Any]:
    """The structured ``syntax_error`` for code that does not compile: where, and what to fix."""
    line, column = exc.lineno or 1, exc.offset or 1
    text = (exc.text or "").rstrip("\n")
    details: dict[str, Any] = {"line": line, "column": column, "text": text[:200]}
    if exc.end_lineno is not None and exc.end_offset is not None:
        details |= {"end_line": exc.end_lineno, "end_column": exc.end_offset}
    message = f"{type(exc).__name__} at line {line}, column {column}: {exc.msg}"
    return error_dict(ErrorType.SYNTAX_ERROR, message[:_MAX_MESSAGE_CHARS], details=details)


def find_syntax_error(source: str) -> dict[str, Any] | None:
    """The ``syntax_error`` the sandbox would report for ``source``, else None; parses, runs nothing.

    The parser's errors (incl. IndentationError) only: a few the compiler finds later
    (``nonlocal`` at top level) are left to the sandbox, which reports them the same way.
    Line numbers are the code's own: the async wrapper is built from the parsed tree.
    """
    try:
        ast.parse(source, MAIN_FILENAME, mode="exec")
    except SyntaxError as exc:
        return syntax_error(exc)
    except (RecursionError, MemoryError, ValueError):  # too complex to judge here: the sandbox will
        return None
    return None


def format_user_traceback(exc: BaseException, sources: dict[str, list[str]]) -> str:
    """Traceback text with only agent/capability frames, numbered as in their code."""
    out = ["Traceback (most recent call last):"]
    for frame in traceback.extract_tb(exc.__traceback__):
        lines = sources.get(frame.filename)
        if lines is None:
            continue
        name = "<module>" if frame.name == _FN_NAME else frame.name
        out.append(f'  File "{frame.filename}", line {frame.lineno}, in {name}')
        lineno = frame.lineno or 0
        if 0 < lineno <= len(lines):
            out.append("    " + lines[lineno - 1].strip())
    out.extend(line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc))
    text = "\n".join(out)
    return text[-_MAX_TRACEBACK_CHARS:]


def exception_message(exc: BaseException) -> str:
    """``Type: message``, capped so a huge exception text cannot blow the result frame."""
    try:
        detail = str(exc)
    except Exception:  # agent exceptions may define a __str__ that raises
        detail = "<unprintable exception>"
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return text[:_MAX_MESSAGE_CHARS]
