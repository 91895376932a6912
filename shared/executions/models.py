"""What clients send to run code and what they get back: the execution contract on the wire."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from shared import tool_ids
from shared.errors import ErrorType
from shared.executions.pages import OutputPage, ReplyTruncation
from shared.executions.status import ExecutionStatus
from shared.executions.trace import LOST_CALL_MESSAGE, TraceSummary, summary_of
from shared.inputs import RequestModel

RetryPolicy = Literal["never", "safe"]
Language = Literal["python", "typescript"]
# JavaScript is TypeScript without annotations: Deno runs both the same way.
LANGUAGE_ALIASES = {
    "javascript": "typescript",
    "js": "typescript",
    "ts": "typescript",
    "py": "python",
}
LANGUAGE_DESCRIPTION = (
    "`python` (default) or `typescript` (`javascript` is accepted as TypeScript): the code is "
    "the body of an async function; TypeScript calls `await mcp.server.tool({...})`"
)
RETRY_DESCRIPTION = (
    "what to do when the sandbox worker running it dies (killed, out of memory, host lost): "
    "`never` (default) ends it `worker_lost`; `safe` re-runs it from the start, at most "
    "AGENTCARDS_EXECUTION_MAX_RETRIES times — only for code whose tool calls may run twice"
)


class ExecutionRequest(RequestModel):
    """`POST /v1/executions` and the MCP `execute_code` tool."""

    code: str = Field(
        min_length=1,
        description="Python or TypeScript (see `language`) run as the body of an async function",
    )
    language: Language = Field(default="python", description=LANGUAGE_DESCRIPTION)
    intent: str | None = Field(default=None, max_length=2000, description="what the code is for")
    args: dict[str, Any] = Field(default_factory=dict, description="visible to the code as `args`")
    tools: list[str] | None = Field(
        default=None, description="tool ids (`server:tool`) the code may call; default all"
    )
    timeout_s: float | None = Field(default=None, gt=0, description="wall-time limit in seconds")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    wait: bool = Field(default=False, description="block until the execution finishes")
    no_cache: bool = Field(
        default=False, description="run it even when a cached result exists (and refresh that)"
    )
    retry: RetryPolicy = Field(default="never", description=RETRY_DESCRIPTION)
    learn: bool = Field(
        default=True,
        description="false: this run is not worth keeping (an experiment, a wrong answer): no "
        "capability is created from it and it counts toward no capability's success",
    )

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, v: Any) -> Any:
        return LANGUAGE_ALIASES.get(v.lower(), v.lower()) if isinstance(v, str) else v

    @field_validator("tools")
    @classmethod
    def _tool_ids(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        bad = [t for t in v if not tool_ids.is_tool_id(t)]
        if bad:
            raise ValueError(f"{tool_ids.TOOL_ID_RULE}: {bad[:5]}")
        return list(dict.fromkeys(v))


class ErrorInfo(BaseModel):
    """A structured error: a stable type, a message that says what to do, maybe a traceback."""

    type: str
    message: str
    traceback: str | None = None
    details: dict[str, Any] | None = None


class ToolCallView(BaseModel):
    """One tool call as the client sees it."""

    tool: str
    ok: bool
    duration_ms: float | None = None
    error: ErrorInfo | None = None


class RetryRecord(BaseModel):
    """One attempt whose worker died and that was re-run (``"retry": "safe"``)."""

    attempt: int
    worker: str | None = None
    reason: str
    at: str | None = None


class ToolFailure(BaseModel):
    """A failed tool call surfaced to the agent even when the code itself succeeded."""

    tool: str
    error: str
    type: str | None = None


class PiiToken(BaseModel):
    """A token the run put in place of a value (never the value): its kind and its tool."""

    token: str
    kind: str
    tool: str | None = Field(default=None, description="the tool whose data held it, if known")


class PiiReport(BaseModel):
    """What privacy did to this run (docs/privacy.md)."""

    produced: list[PiiToken] = Field(default_factory=list)
    unresolved: list[str] = Field(
        default_factory=list,
        description="tokens the run passed to tools that did not resolve (another tenant's, "
        "expired or made up): the tool got them as they are",
    )


class ExecutionView(BaseModel):
    """An execution as returned by the REST API and MCP tools."""

    id: str
    status: ExecutionStatus
    language: Language = "python"
    intent: str | None = None
    result: Any = None
    error: ErrorInfo | None = None
    stdout: str = ""
    stdout_truncated: bool = False
    tool_calls: list[ToolCallView] = Field(default_factory=list)
    tool_failures: list[ToolFailure] = Field(default_factory=list)
    duration_ms: float | None = None
    queued_ms: float | None = None
    created_at: str | None = None
    finished_at: str | None = None
    capability: dict[str, Any] | None = None
    suggestions: list[dict[str, Any]] = Field(default_factory=list)
    cache_hit: Literal["execution", "capability", "intent"] | None = Field(
        default=None, description="which cache level answered; null when the code ran"
    )
    cached_at: str | None = Field(default=None, description="when the reused result was made")
    source_execution_id: str | None = Field(
        default=None, description="the execution whose result was reused"
    )
    mcp_task_id: str | None = Field(
        default=None,
        description="the MCP task (io.modelcontextprotocol/tasks) an MCP client polls this "
        "run by, when its tools/call answered with one",
    )
    retry: RetryPolicy = Field(default="never", description="the submission's retry policy")
    attempts: int = Field(
        default=0, description="how many times a sandbox worker started it (0: never ran)"
    )
    retries: list[RetryRecord] = Field(
        default_factory=list, description="each lost attempt that was re-run, and why"
    )
    truncated: ReplyTruncation | None = Field(
        default=None,
        description="set when this reply left parts out to fit the client's message limit: "
        "which, their full sizes, and how to read them (get_execution with part/offset)",
    )
    page: OutputPage | None = Field(
        default=None, description="the page asked for with `part` (the parts themselves left empty)"
    )
    trace_id: str | None = Field(
        default=None,
        description="the OpenTelemetry trace the execution ran in (32 hex digits; null when "
        "tracing is off)",
    )
    pii: PiiReport | None = Field(
        default=None, description="tokens produced and tokens not resolved; null when none"
    )
    user_id: str | None = Field(
        default=None,
        description="the person who submitted it (their subject at the identity provider); "
        "null when an API key did",
    )
    pending_approvals: list[dict[str, Any]] | None = Field(
        default=None,
        description="the calls waiting for a person's answer (status waiting_approval): "
        "call_id, server, tool, args, expires_at; answered by POST "
        "/v1/executions/{id}/approvals/{call_id}",
    )


def tool_call_views(summary: TraceSummary) -> list[ToolCallView]:
    """The response's ``tool_calls`` (one entry per call, in start order); a lost call counts as failed."""
    views = []
    for call in summary.tool_calls:
        error = None
        if not call.ok:
            error = ErrorInfo(
                type=call.error_type
                or (ErrorType.LOST if call.ok is None else ErrorType.TOOL_ERROR),
                message=call.error_message or LOST_CALL_MESSAGE,
            )
        views.append(
            ToolCallView(
                tool=call.tool, ok=bool(call.ok), duration_ms=call.duration_ms, error=error
            )
        )
    return views


def view_from_row(row: dict[str, Any]) -> ExecutionView:
    """Build the client view of an `executions` row."""
    summary = summary_of(row)
    calls = tool_call_views(summary)
    failures = [ToolFailure(**f) for f in summary.failures]
    error = row.get("error")
    extras = row.get("extras") or {}
    pending = row.get("pending_approvals") or None
    return ExecutionView(
        id=str(row["id"]),
        status=ExecutionStatus.WAITING_APPROVAL if pending else row["status"],
        pending_approvals=pending,
        language=row.get("language") or "python",
        intent=row.get("intent"),
        result=row.get("result"),
        error=ErrorInfo(**error) if error else None,
        stdout=row.get("stdout") or "",
        stdout_truncated=bool(row.get("stdout_truncated")),
        tool_calls=calls,
        tool_failures=failures,
        duration_ms=row.get("duration_ms"),
        queued_ms=row.get("queued_ms"),
        created_at=row["created_at"].isoformat() if row.get("created_at") else None,
        finished_at=row["finished_at"].isoformat() if row.get("finished_at") else None,
        capability=extras.get("capability"),
        suggestions=extras.get("suggestions") or [],
        cache_hit=extras.get("cache_hit"),
        cached_at=extras.get("cached_at"),
        source_execution_id=extras.get("source_execution_id"),
        mcp_task_id=row.get("mcp_task_id"),
        retry=row.get("retry") or "never",
        attempts=int(row.get("attempts") or 0),
        retries=[RetryRecord(**r) for r in row.get("retries") or []],
        trace_id=row.get("trace_id"),
        user_id=row.get("user_id"),
        pii=PiiReport(**row["pii"]) if row.get("pii") else None,
    )
