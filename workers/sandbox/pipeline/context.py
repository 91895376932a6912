"""What the stages of one run share: the claimed row, what the stages found, how it ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.auth.grants import Grant
from shared.cache.runs import RunCache, Scope
from shared.config import Settings
from shared.privacy.tokens import Tokenizer
from shared.sandbox.bridge import CapabilitySource
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import ToolSpec


@dataclass
class RunContext:
    """One claimed execution as it goes through the stages (``stages.STAGES``, in order)."""

    row: dict[str, Any]  # the executions row, already `running` and ours
    settings: Settings
    redis: redis.Redis
    # the tools' version the claim read (``shared.tools.store.run_tools_at``)
    tools_version: Any = None
    # scope: what the run may call and inline
    grant: Grant | None = None
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    known_tools: list[str] = field(default_factory=list)
    # servers whose tools are not known until a person connects them (their calls go ahead)
    awaiting_servers: frozenset[str] = frozenset()
    # every known tool's row, removed servers' too (``run_tools``): cache.prepare's settings
    known_tool_rows: list[dict[str, Any]] = field(default_factory=list)
    capabilities: dict[str, CapabilitySource] = field(default_factory=dict)
    # scope, for cache.prepare: the result cache's scope, its servers' generations before the run
    cache_scope: Scope | None = None
    generations: dict[str, int] | None = None
    # cache.prepare: the scope's policies and generations before the run
    cache: RunCache | None = None
    # sandbox: what the child did (a cancelled run is an outcome too)
    outcome: ExecutionOutcome | None = None
    # sandbox: the dead child's reaping and the next child's making (sandbox.release)
    teardown: list[Callable[[], None]] = field(default_factory=list)
    # privacy: the run's tokenizer (events and outcome), tokens given that did not resolve
    pii: Tokenizer | None = None
    pii_unresolved: set[str] = field(default_factory=set)
    # store (or store.end_broken): the terminal status in the row
    status: str | None = None
    # store: the row as it wrote it (the announce carries it to the waiting gateway)
    stored_row: dict[str, Any] | None = None
    # runner: the first exception a stage raised; the run then ends broken
    failure: Exception | None = None

    @property
    def execution_id(self) -> str:
        return str(self.row["id"])
