"""Tool search's request and response, as REST and MCP both take and return them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from shared.inputs import RequestModel

# One parameter name on every surface (GET /v1/tools, POST /v1/tools/search, MCP search_tools).
Declarations = Literal["typescript"]
DECLARATIONS_DESCRIPTION = (
    "`typescript`: each tool also carries `declaration`, a TypeScript type of its input "
    "(from its JSON Schema, descriptions as JSDoc) and, where it declares an output schema, of "
    "what it returns, for code called with language typescript"
)


class ToolSearchRequest(RequestModel):
    """`POST /v1/tools/search` and the MCP `search_tools` tool."""

    query: str = Field(
        min_length=1, max_length=2000, description="the task in words, e.g. 'read a file'"
    )
    limit: int = Field(default=10, ge=1, le=100, description="how many tools to return, best first")
    context_tools: list[str] = Field(
        default_factory=list,
        description="tool ids (`server:tool`) already in use: tools used with them rank higher",
    )
    include_out_of_scope: bool = Field(
        default=False,
        description="also list tools outside your API key's allow-list, after the ones you "
        "may call, marked runnable: false",
    )
    declarations: Declarations | None = Field(
        default=None,
        description=DECLARATIONS_DESCRIPTION,
    )

    @field_validator("query")
    @classmethod
    def _has_words(cls, value: str) -> str:
        # A blank query has no meaning to rank by: every tool would be an arbitrary hit.
        if not value.strip():
            raise ValueError("query must contain words (it is empty or only whitespace)")
        return value


class ToolScores(BaseModel):
    """The signals fused into a hit's score."""

    semantic: float | None = Field(description="cosine similarity of query and tool, if embedded")
    lexical: float = Field(description="full-text match of the query's words")
    pagerank: float = Field(description="centrality in the tool usage graph")
    graph: float = Field(description="co-use with the context tools")
    learned: float = Field(
        default=0.0,
        description="vote of your similar past runs, in [-1, 1]: + used, - failed for them",
    )


class ToolHit(BaseModel):
    """One tool found for a query, with why it ranked where it did."""

    id: str = Field(description="`server:tool`; call it as `mcp.<server>.<tool>(...)`")
    server: str
    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="JSON Schema of the tool's arguments")
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema of the structured content the tool returns, where its server "
        "declares one (absent otherwise)",
        exclude_if=lambda value: value is None,
    )
    returns: str = Field(
        default="",
        description="what a call gives your code, with an example, e.g. "
        "\"returns its structured content (see output_schema), e.g. {'content': '…'}\"",
    )
    available: bool = Field(description="false while its server is down or the tool is unusable")
    score: float = Field(description="fused rank score; higher is better")
    scores: ToolScores
    why: str = Field(description="the signals that placed the tool, strongest first")
    runnable: bool = Field(default=True, description="false when your API key may not call it")
    not_runnable_reason: str | None = Field(
        default=None,
        description="why runnable is false (absent when it is true)",
        exclude_if=lambda value: value is None,
    )
    declaration: str | None = Field(
        default=None,
        description="with declarations=typescript: the TypeScript type of the tool's input",
        # Absent, not null, when not asked: a search's hits stay as small as they were.
        exclude_if=lambda value: value is None,
    )


class ToolSearchResponse(BaseModel):
    """`POST /v1/tools/search` and the MCP `search_tools` tool: the same body on both."""

    query: str
    hits: list[ToolHit]
