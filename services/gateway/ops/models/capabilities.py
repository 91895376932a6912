"""The capability family's requests and responses: search and execute (REST and MCP),
management (REST)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from shared.executions.models import RETRY_DESCRIPTION, RetryPolicy
from shared.inputs import RequestModel

APPROVAL_TOOLS = (
    "tools whose calls waited for a person's approval when its code ran (learned from its "
    "runs, server:tool, sorted): running it asks someone; empty when no run has"
)


class CapabilitySearchRequest(RequestModel):
    """`POST /v1/capabilities/search` and the MCP `search_capabilities` tool (no threshold: adaptive)."""

    intent: str = Field(
        min_length=1, max_length=2000, description="what you want to do, in one sentence"
    )
    include_suggestions: bool = Field(
        default=False, description="add related tools and capabilities as suggestions"
    )
    limit: int = Field(default=5, ge=1, le=20, description="how many matches to return at most")
    include_out_of_scope: bool = Field(
        default=False,
        description="also list capabilities calling tools outside your API key's allow-list, "
        "after the runnable ones, marked runnable: false",
    )
    language: Literal["python", "typescript"] | None = Field(
        default=None,
        description="only capabilities written in this language (default: both; each match "
        "says its `language`)",
    )


class CapabilityExecuteRequest(RequestModel):
    """`POST /v1/capabilities/{id}/execute`: arguments checked against the inferred schema."""

    args: dict[str, Any] = Field(
        default_factory=dict, description="arguments matching the capability's parameters_schema"
    )
    wait: bool = Field(default=False, description="block until the execution finishes")
    timeout_s: float | None = Field(
        default=None, gt=0, description="wall-time limit in seconds; default the server's"
    )
    no_cache: bool = Field(
        default=False, description="run it even when a cached result exists (and refresh that)"
    )
    retry: RetryPolicy = Field(default="never", description=RETRY_DESCRIPTION)
    learn: bool = Field(
        default=True,
        description="false: this run says nothing about the capability (it counts toward "
        "neither its successes nor its failures)",
    )


class CapabilityMatch(BaseModel):
    """One capability matched to an intent."""

    id: str
    name: str = Field(description="run it by this name or by id with execute_capability")
    description: str | None
    intent: str | None
    code: str
    language: Literal["python", "typescript"] = Field(
        default="python",
        description="the language of `code`: execute_capability runs either; code inlines "
        "only capabilities of its own language",
    )
    parameters_schema: dict[str, Any] = Field(description="JSON Schema of its `args`")
    tools_used: list[str] | None
    approval_tools: list[str] = Field(default_factory=list, description=APPROVAL_TOOLS)
    success_rate: float
    usage_count: int
    score: float = Field(description="semantic similarity * reliability")
    semantic_score: float
    degraded: bool = Field(description="true when a tool it uses is unavailable now")
    missing_tools: list[str] = Field(description="the unavailable tools of a degraded match")
    runnable: bool = Field(
        default=True, description="false when it calls tools your API key may not call"
    )
    out_of_scope_tools: list[str] = Field(
        default_factory=list, description="its tools outside your API key's allow-list"
    )
    not_runnable_reason: str | None = Field(default=None, description="why runnable is false")
    below_threshold: bool = Field(
        default=False, description="true for a candidate scoring under threshold_used"
    )


class CapabilitySearchResponse(BaseModel):
    """`POST /v1/capabilities/search` and the MCP `search_capabilities` tool: the same body on both."""

    capabilities: list[CapabilityMatch]
    threshold_used: float = Field(description="the tenant's adaptive match threshold")
    total_found: int = Field(description="matches at or above the threshold before the limit")
    suggestions: list[dict[str, Any]] | None = Field(
        default=None, description="related tools and capabilities; null unless asked for"
    )
    candidates: list[CapabilityMatch] = Field(
        default_factory=list,
        description="when no match reaches the threshold: the closest below it, best first, "
        "with their scores (below_threshold: true); empty otherwise",
    )


class CapabilityItem(BaseModel):
    """One capability as the dashboard and the CLI show it (a contract: exactly these keys)."""

    id: str
    name: str
    description: str
    code: str
    intent: str
    aliases: list[str] = Field(description="other phrasings it is matched by")
    tools_used: list[str]
    approval_tools: list[str] = Field(description=APPROVAL_TOOLS)
    parameters_schema: dict[str, Any] = Field(description="JSON Schema of its `args`")
    success_rate: float
    usage_count: int
    last_used: str | None = Field(description="ISO 8601; null when never run")
    created_at: str
    community_id: int | None = Field(description="its tool-graph community (Louvain)")
    version: int = Field(description="1, 2, ... within the capabilities of its name")
    versions: int = Field(
        description="how many versions it has (GET /api/capabilities lists the latest of each)"
    )
    source: str = Field(description="`emergent` (learned) or `manual`")
    disabled: bool = Field(
        description="an operator disabled it: not matched, suggested or searched; runs refused"
    )
    language: Literal["python", "typescript"] = Field(
        description="the language of its code: execute_capability runs either; code inlines "
        "only capabilities of its own language"
    )


class Learner(BaseModel):
    """A person whose runs taught a capability (created or updated it)."""

    user_id: str = Field(description="their `sub` at the identity provider")
    runs: int = Field(description="how many of their runs taught it")
    first_run_at: str
    last_run_at: str


class CapabilityDetail(CapabilityItem):
    """`GET /v1/capabilities/{id}`: the item, and who taught it."""

    learned_from: list[Learner] = Field(
        description="the people whose runs it was learned from, most runs first (at most 20); "
        "empty for runs made with API keys"
    )


class CapabilityList(BaseModel):
    """`GET /api/capabilities`: one page and how many match in all."""

    capabilities: list[CapabilityItem]
    total: int


class CapabilityCreate(RequestModel):
    """`POST /v1/capabilities`: code and what it does; name, description and aliases optional."""

    code: str = Field(min_length=1, max_length=1_000_000, description="sandbox code, as run")
    intent: str = Field(min_length=1, max_length=2000, description="what it does, one sentence")
    name: str | None = Field(
        default=None,
        description="snake_case; an existing name makes this its next version "
        "(default: derived from the intent)",
    )
    description: str | None = Field(default=None, max_length=10_000)
    aliases: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=50, description="other phrasings to match it by"
    )
    language: Literal["python", "typescript"] = Field(
        default="python", description="the language of `code`"
    )


class CapabilityPatch(RequestModel):
    """`PATCH /v1/capabilities/{id}`: only the fields given change; `aliases` replaces the list."""

    name: str | None = None
    description: str | None = Field(default=None, max_length=10_000)
    intent: str | None = Field(default=None, min_length=1, max_length=2000)
    aliases: list[Annotated[str, Field(min_length=1, max_length=2000)]] | None = Field(
        default=None, max_length=50
    )
    disabled: bool | None = Field(
        default=None,
        description="true: never matched, suggested or offered by search, and runs are "
        "refused (`capability_disabled`) until set false again",
    )


class ImportResult(BaseModel):
    """`POST /v1/capabilities/import`: what became of each bundle entry."""

    created: int
    merged: int
    capabilities: list[dict[str, Any]] = Field(
        description="per entry: id (here), name, version, source_id (in the bundle), "
        "status (`created` or `merged`)"
    )
