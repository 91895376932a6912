"""Run stages in order; after the claim, whatever a stage raises, the row still ends.

A stage is a function of the ``RunContext``. Its ``when`` says in which runs it takes part:
``OK`` stages run while no stage has failed, ``FAILED`` ones only once one has (they end
the row in a terminal state instead), ``ALWAYS`` ones in both (learning is sent for every
run). The first exception of a stage that is not best-effort is kept in ``ctx.failure``
and skips the ``OK`` stages after it; a best-effort stage's exception (and any raised once
the run has failed already) is logged and changes nothing.

Wrappers run around every stage (a context manager per stage and run, outermost first):
tracing or timing a stage is a wrapper, not a branch inside the stages.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum

from workers.sandbox.pipeline.context import RunContext

log = logging.getLogger(__name__)


class When(StrEnum):
    OK = "ok"  # while no stage has failed
    FAILED = "failed"  # only once a stage has failed
    ALWAYS = "always"  # in every run


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RunContext], None]
    when: When = When.OK
    # A best-effort stage's exception is logged, never a failure of the run.
    best_effort: bool = False


Wrapper = Callable[[Stage, RunContext], AbstractContextManager[object]]


def run_pipeline(
    stages: Sequence[Stage], ctx: RunContext, *, wrappers: Sequence[Wrapper] = ()
) -> RunContext:
    """Run the stages that are due, in order; never raises an ``Exception`` a stage raised."""
    for stage in stages:
        if not _due(stage, ctx):
            continue
        try:
            if wrappers:
                with contextlib.ExitStack() as around:
                    for wrap in wrappers:
                        around.enter_context(wrap(stage, ctx))
                    stage.run(ctx)
            else:
                stage.run(ctx)
        except Exception as exc:
            if stage.best_effort or ctx.failure is not None:
                log.exception("execution %s: stage %s failed", ctx.execution_id, stage.name)
            else:
                log.exception(
                    "execution %s failed in the worker (%s)", ctx.execution_id, stage.name
                )
                ctx.failure = exc
    return ctx


def _due(stage: Stage, ctx: RunContext) -> bool:
    if stage.when is When.ALWAYS:
        return True
    return (ctx.failure is None) == (stage.when is When.OK)
