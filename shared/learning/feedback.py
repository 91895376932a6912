"""What ingested executions teach the adaptive thresholds and the suggestion engine."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from shared.db import database_key
from shared.matching.capabilities import best_below_threshold_many
from shared.matching.thresholds import (
    MIN_THRESHOLD,
    Context,
    Outcome,
    record_outcomes,
)
from shared.suggestions.engine import suggest
from shared.suggestions.feedback import mark_used_by_execution, record_shown_many

log = logging.getLogger(__name__)
Conn = psycopg.Connection[dict[str, Any]]
# How long a learning worker reuses the suggestions for one set of context tools.
SUGGESTION_TTL_S = 5.0


def rerun_outcomes(conn: Conn, *, reruns: Sequence[tuple[str, str, bool]]) -> None:
    """Matched capabilities were re-run, as (tenant, capability name, ok): success confirms
    the match, failure was a false positive."""
    for tenant_id in dict.fromkeys(tenant for tenant, _, _ in reruns):
        record_outcomes(
            conn,
            context=Context.CAPABILITY_MATCHING,
            outcomes=[
                (
                    Outcome.TRUE_POSITIVE if ok else Outcome.FALSE_POSITIVE,
                    f"re-run of {name} {'succeeded' if ok else 'failed'}",
                )
                for tenant, name, ok in reruns
                if tenant == tenant_id
            ],
            tenant_id=tenant_id,
        )


@dataclass(frozen=True)
class NewCapability:
    """A capability an ingestion just created, with what its intent was embedded as."""

    tenant_id: str
    capability_id: str
    intent_embedding: list[float]
    tools_used: list[str]


def detect_false_negatives(conn: Conn, *, created: Sequence[NewCapability]) -> int:
    """New code whose intent was close to a reliable capability doing the same job: a miss.

    "Close" is at least MIN_THRESHOLD (closer than anything unrelated scores, see bench
    match) yet below the current threshold; "the same job" is a shared tool, so an
    intent that merely sounds alike does not drag the threshold down. Every new
    capability of a batch is judged against the threshold the batch started with.
    Returns how many misses were recorded.
    """
    misses = 0
    for tenant_id in dict.fromkeys(c.tenant_id for c in created):
        mine = [c for c in created if c.tenant_id == tenant_id]
        nearest = best_below_threshold_many(
            conn,
            queries=[([c.capability_id], c.intent_embedding) for c in mine],
            tenant_id=tenant_id,
        )
        found = [
            (
                Outcome.FALSE_NEGATIVE,
                f"new code matched capability {near['id']} at {near['score']:.3f}, "
                f"below the threshold {near['threshold']:.3f}",
            )
            for new, near in zip(mine, nearest, strict=True)
            if near is not None
            and near["score"] >= MIN_THRESHOLD
            and set(near["tools_used"]) & set(new.tools_used)
        ]
        if found:
            record_outcomes(
                conn, context=Context.CAPABILITY_MATCHING, outcomes=found, tenant_id=tenant_id
            )
        misses += len(found)
    return misses


class SuggestionCache:
    """Suggestions per (database, tenant, context tools), kept for ``ttl_s`` seconds.

    The engine reads the 2-hop graph around the context (~100 ms around a tool that
    thousands of capabilities contain); learning batches of the same code ask it the
    same question many times a second, and a suggestion a few seconds old is as good.
    """

    def __init__(self, *, ttl_s: float = SUGGESTION_TTL_S, size: int = 1024) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: OrderedDict[tuple[str, str, tuple[str, ...]], tuple[float, Any]] = (
            OrderedDict()
        )

    def get(self, conn: Conn, *, tenant_id: str, tools: Sequence[str]) -> list[dict[str, Any]]:
        key = (database_key(conn), tenant_id, tuple(tools))
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None and now - hit[0] < self.ttl_s:
            return list(hit[1])
        found = suggest(conn, context_tools=list(tools), tenant_id=tenant_id)
        self._entries[key] = (now, found)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return list(found)

    def clear(self) -> None:
        self._entries.clear()


SUGGESTIONS = SuggestionCache()


@dataclass(frozen=True)
class SuggestionRequest:
    """One ingested execution's part in suggestion feedback."""

    execution_id: str
    tenant_id: str
    used_ids: list[str]  # tools and capability it used: closes earlier suggestions of them
    tools: list[str]  # context for new suggestions
    exclude: list[str]  # the capability the run is or became: no use suggesting it back


@dataclass(frozen=True)
class Suggested:
    """Per execution id: what was suggested after it, and how many earlier suggestions it used."""

    shown: dict[str, list[Any]]
    accepted: dict[str, int]


def suggestions_for(conn: Conn, *, requests: Sequence[SuggestionRequest]) -> Suggested:
    """Close earlier suggestions these runs used, then suggest what usually comes next.

    By execution id. The engine runs once per distinct (tenant, tools) and its
    answer is reused for a few seconds (``SuggestionCache``).
    """
    accepted = mark_used_by_execution(
        conn, uses=[(r.tenant_id, r.execution_id, r.used_ids) for r in requests]
    )
    out: dict[str, list[Any]] = {}
    for r in requests:
        found = SUGGESTIONS.get(conn, tenant_id=r.tenant_id, tools=r.tools) if r.tools else []
        excluded = set(r.exclude)
        out[r.execution_id] = [s for s in found if str(s["id"]) not in excluded]
    record_shown_many(
        conn, shown=[(r.tenant_id, r.execution_id, out[r.execution_id]) for r in requests]
    )
    return Suggested(
        shown=out, accepted={r.execution_id: accepted[r.execution_id] for r in requests}
    )
