"""Compiling agent code into an async body and formatting its tracebacks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shared.sandbox.child import api, usercode


def _run(source: str, **ns: Any) -> Any:
    func = usercode.compile_body(source, {"__builtins__": __builtins__, **ns})
    return asyncio.run(func())


def test_last_expression_is_the_result() -> None:
    assert _run("x = 20\nx + 22") == 42
    assert _run("x = 1") is None
    assert _run("") is None


def test_top_level_return_and_await() -> None:
    assert _run("import asyncio\nawait asyncio.sleep(0)\nreturn 'ok'") == "ok"


def test_functions_see_top_level_names() -> None:
    assert _run("k = 3\ndef f():\n    return k * 2\nf()") == 6


def test_top_level_yield_is_rejected() -> None:
    with pytest.raises(SyntaxError):
        usercode.compile_body("yield 1", {})


def test_traceback_keeps_only_user_frames_with_user_line_numbers() -> None:
    source = "def f():\n    return 1 / 0\n\nf()"
    func = usercode.compile_body(source, {})
    with pytest.raises(ZeroDivisionError) as info:
        asyncio.run(func())
    text = usercode.format_user_traceback(info.value, {usercode.MAIN_FILENAME: source.splitlines()})
    assert "line 4, in <module>" in text and "line 2, in f" in text
    assert "return 1 / 0" in text
    assert "asyncio" not in text and __file__ not in text


def test_args_access_styles() -> None:
    args = api.wrap_args({"path": "/a", "n": {"k": 1}})
    assert args["path"] == args.path == args.get("path") == "/a"
    assert args.get("missing", 5) == 5
    assert args.n.k == 1
    with pytest.raises(AttributeError):
        _ = args.missing
