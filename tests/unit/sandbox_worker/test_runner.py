"""The pipeline runner's rules, with recording stages: order, failure, best effort, wrappers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shared.config import Settings
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.runner import Stage, When, run_pipeline


def _ctx() -> RunContext:
    return RunContext(row={"id": "e1"}, settings=Settings(), redis=None)  # type: ignore[arg-type]


class Boom(Exception):
    pass


def _stages(calls: list[str], spec: list[tuple[str, When, bool, bool]]) -> list[Stage]:
    """(name, when, best_effort, raises) → stages that record their name when they run."""

    def body(name: str, raises: bool) -> Callable[[RunContext], None]:
        def run(_: RunContext) -> None:
            calls.append(name)
            if raises:
                raise Boom(name)

        return run

    return [Stage(n, body(n, r), when=w, best_effort=b) for n, w, b, r in spec]


OK, FAILED, ALWAYS = When.OK, When.FAILED, When.ALWAYS


def test_without_a_failure_the_ok_and_always_stages_run_in_order() -> None:
    calls: list[str] = []
    stages = _stages(
        calls,
        [("a", OK, False, False), ("broken", FAILED, False, False), ("b", OK, False, False),
         ("last", ALWAYS, False, False)],
    )  # fmt: skip
    ctx = run_pipeline(stages, _ctx())
    assert calls == ["a", "b", "last"]
    assert ctx.failure is None


def test_a_raising_stage_skips_the_ok_stages_and_runs_the_failed_and_always_ones() -> None:
    calls: list[str] = []
    stages = _stages(
        calls,
        [("a", OK, False, True), ("b", OK, False, False), ("broken", FAILED, False, False),
         ("c", OK, True, False), ("last", ALWAYS, True, False)],
    )  # fmt: skip
    ctx = run_pipeline(stages, _ctx())
    assert calls == ["a", "broken", "last"]
    assert isinstance(ctx.failure, Boom) and str(ctx.failure) == "a"


def test_the_first_failure_is_kept_and_later_raises_do_not_stop_the_always_stages() -> None:
    calls: list[str] = []
    stages = _stages(
        calls,
        [("a", OK, False, True), ("broken", FAILED, False, True), ("last", ALWAYS, False, True),
         ("after", ALWAYS, False, False)],
    )  # fmt: skip
    ctx = run_pipeline(stages, _ctx())
    assert calls == ["a", "broken", "last", "after"]
    assert str(ctx.failure) == "a"


def test_a_best_effort_stage_that_raises_is_not_a_failure() -> None:
    calls: list[str] = []
    stages = _stages(
        calls,
        [("a", OK, True, True), ("b", OK, False, False), ("broken", FAILED, False, False)],
    )
    ctx = run_pipeline(stages, _ctx())
    assert calls == ["a", "b"]
    assert ctx.failure is None


def test_a_base_exception_is_not_swallowed() -> None:
    def interrupt(_: RunContext) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_pipeline([Stage("x", interrupt)], _ctx())


def test_wrappers_run_around_every_due_stage_outermost_first_and_see_its_exception() -> None:
    calls: list[str] = []
    stages = _stages(
        calls, [("a", OK, False, False), ("b", OK, False, True), ("skipped", OK, False, False)]
    )

    def wrapper(tag: str) -> Any:
        @contextmanager
        def around(stage: Stage, ctx: RunContext) -> Iterator[None]:
            calls.append(f"{tag}>{stage.name}")
            try:
                yield
            except Boom:
                calls.append(f"{tag}!{stage.name}")
                raise
            calls.append(f"{tag}<{stage.name}")

        return around

    ctx = run_pipeline(stages, _ctx(), wrappers=[wrapper("outer"), wrapper("inner")])
    assert calls == [
        "outer>a", "inner>a", "a", "inner<a", "outer<a",
        "outer>b", "inner>b", "b", "inner!b", "outer!b",
    ]  # fmt: skip
    assert str(ctx.failure) == "b"
