"""A run becomes a capability only if it succeeded, had an intent, every tool call succeeded,
it returned something (an empty result is no evidence the code did its job) and its caller
did not say it was not worth keeping (``"learn": false``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared.executions.status import ExecutionStatus
from shared.executions.trace import TraceSummary

# What a run did to its capability, as its report's ``capability.status`` says (docs/usage.md):
# ``created`` a new capability, ``versioned`` a new version of one (the same tool calls in
# other code; ``version`` says which), ``updated`` one an earlier run of the same batch
# created, ``reused`` one it re-ran.
CAPABILITY_STATUSES = ("created", "versioned", "updated", "reused")
CREATED_STATUSES = ("created", "versioned")  # the run brought the row into being


class Verdict(StrEnum):
    """Why a run was or was not learned; the first that applies, in this order."""

    LEARN = "learn"
    EXECUTION_FAILED = "execution_failed"
    NO_INTENT = "no_intent"
    TOOL_FAILURES = "tool_failures"  # counts in capabilities_skipped_tool_failures_total
    NOT_WANTED = "not_wanted"  # the caller said ``"learn": false``
    EMPTY_RESULT = "empty_result"  # {}, [], None or "": no evidence of success


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
    summary: TraceSummary,
    wanted: bool = True,
    result_empty: bool = False,
) -> LearningDecision:
    """Learn vs skip for one finished execution: all tool calls succeeded, or no capability.

    A call with a start but no end (lost) counts as failed.
    """
    failures = summary.failures
    tools_used = list(dict.fromkeys(call.tool for call in summary.tool_calls))
    failed_tools = list(dict.fromkeys(item["tool"] for item in failures))
    if status != ExecutionStatus.SUCCEEDED:
        verdict = Verdict.EXECUTION_FAILED
    elif not (intent and intent.strip()):
        verdict = Verdict.NO_INTENT
    elif failures:
        verdict = Verdict.TOOL_FAILURES
    elif not wanted:
        verdict = Verdict.NOT_WANTED
    elif result_empty:
        verdict = Verdict.EMPTY_RESULT
    else:
        verdict = Verdict.LEARN
    return LearningDecision(
        verdict=verdict, tools_used=tools_used, failed_tools=failed_tools, tool_failures=failures
    )
