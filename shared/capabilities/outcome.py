"""A run becomes a capability only if it succeeded, had an intent and every tool call succeeded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared.errors import ErrorType
from shared.executions.status import ExecutionStatus
from shared.executions.trace import (
    ToolCall,
    TraceEvent,
    tool_calls_from_summary,
    tool_calls_from_trace,
)

# What a lost call (start recorded, no end) reports: the bridge never got an answer.
LOST_CALL_MESSAGE = "no result recorded for this call (lost or cut off by the deadline)"


class Verdict(StrEnum):
    """Why a run was or was not learned; the first that applies, in this order."""

    LEARN = "learn"
    EXECUTION_FAILED = "execution_failed"
    NO_INTENT = "no_intent"
    TOOL_FAILURES = "tool_failures"  # counts in capabilities_skipped_tool_failures_total


@dataclass(frozen=True)
class LearningDecision:
    """The verdict plus what the learning worker stores or logs."""

    verdict: Verdict
    tools_used: list[str] = field(default_factory=list)  # distinct, first-call order, failed too
    failed_tools: list[str] = field(default_factory=list)  # distinct, first-failure order
    tool_failures: list[dict[str, Any]] = field(default_factory=list)  # one per failed call

    @property
    def learn(self) -> bool:
        """True when the capability must be upserted."""
        return self.verdict is Verdict.LEARN


def decide_learning(
    *,
    status: str,
    intent: str | None,
    trace: Sequence[TraceEvent],
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
) -> LearningDecision:
    """Learn vs skip for one finished execution: all tool calls succeeded, or no capability.

    Tool calls come from the trace; the ``tool_calls`` summary is used only when the
    trace holds no tool events. A call with a start but no end counts as failed.
    """
    calls = _calls(trace=trace, tool_calls=tool_calls)
    failures = tool_failures_from_calls(calls)
    tools_used = list(dict.fromkeys(call.tool for call in calls))
    failed_tools = list(dict.fromkeys(item["tool"] for item in failures))
    if status != ExecutionStatus.SUCCEEDED:
        verdict = Verdict.EXECUTION_FAILED
    elif not (intent and intent.strip()):
        verdict = Verdict.NO_INTENT
    elif failures:
        verdict = Verdict.TOOL_FAILURES
    else:
        verdict = Verdict.LEARN
    return LearningDecision(
        verdict=verdict, tools_used=tools_used, failed_tools=failed_tools, tool_failures=failures
    )


def tool_failures(
    *, trace: Sequence[TraceEvent], tool_calls: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The response's ``tool_failures``: ``[{"tool", "error", "type"}]``, one per failed call.

    Each names the tool and its error (``{"tool": "gmail:get_profile", "error": "MCP server
    not connected"}``); ``type`` (the structured error type, or None) is added so agents
    can tell a timeout from a refusal.
    """
    return tool_failures_from_calls(_calls(trace=trace, tool_calls=tool_calls))


def tool_failures_from_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """``tool_failures`` entries for the calls that did not succeed, in call order."""
    out: list[dict[str, Any]] = []
    for call in calls:
        if call.ok:
            continue
        if call.ok is None:
            out.append({"tool": call.tool, "error": LOST_CALL_MESSAGE, "type": ErrorType.LOST})
        else:
            message = call.error_message or call.error_type or "tool call failed"
            out.append({"tool": call.tool, "error": message, "type": call.error_type})
    return out


def _calls(
    *, trace: Sequence[TraceEvent], tool_calls: Sequence[Mapping[str, Any]] | None
) -> list[ToolCall]:
    calls = tool_calls_from_trace(trace)
    if not calls and tool_calls:
        calls = tool_calls_from_summary(tool_calls)
    return calls
