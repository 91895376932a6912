"""The stages of a claimed run, in order. A new concern (tokenising results, tracing) is a
new stage here or a wrapper passed to ``run_pipeline``, not a branch inside a stage."""

from __future__ import annotations

from workers.sandbox.pipeline import (
    announce,
    approvals,
    cache,
    learn,
    privacy,
    sandbox,
    scope,
    store,
)
from workers.sandbox.pipeline.runner import Stage, When

STAGES: tuple[Stage, ...] = (
    Stage("scope", scope.resolve_scope),
    Stage("cache.prepare", cache.prepare),
    Stage("sandbox", sandbox.run_sandboxed),
    # Before anything stores, caches or announces the outcome: values become tokens.
    Stage("privacy", privacy.tokenize_outcome),
    # Before the store: a run whose writes could not be invalidated is stored `failed`.
    Stage("cache.invalidate_writes", cache.invalidate_writes),
    Stage("store", store.store),
    Stage("end_broken", store.end_broken, when=When.FAILED),
    # After the store: these never change the stored run.
    Stage("cache.remember", cache.remember, best_effort=True),
    Stage("announce", announce.announce, best_effort=True),
    # Whatever happened: the dead child reaped and the next made, once the end is announced.
    Stage("sandbox.release", sandbox.release, when=When.ALWAYS, best_effort=True),
    Stage("approvals.close", approvals.close_unanswered, best_effort=True),
    Stage("learn", learn.learn, when=When.ALWAYS, best_effort=True),
)
