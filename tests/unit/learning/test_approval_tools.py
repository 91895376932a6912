"""Which capability a run's approvals are recorded on: the one it taught or re-ran, even a
re-run left out of the stats; none for a run that taught nothing."""

from __future__ import annotations

from typing import Any

from shared.executions.trace import TraceSummary
from shared.learning.capability_runs import CapabilityOutcome
from shared.learning.ingest import _approval_tools

PAY = TraceSummary(approval_tools=("rec:pay",))


def test_approvals_go_to_the_capability_the_run_taught_or_ran() -> None:
    rows: list[dict[str, Any]] = [
        {"id": "taught", "capability_id": None},
        {"id": "rerun", "capability_id": "cap-b"},
        {"id": "cancelled-rerun", "capability_id": "cap-c"},  # not in the stats: no outcome
        {"id": "nothing-learned", "capability_id": None},
        {"id": "no-approval", "capability_id": "cap-d"},
    ]
    summaries = {
        "taught": TraceSummary(approval_tools=("rec:pay", "fs:write")),
        "rerun": PAY,
        "cancelled-rerun": PAY,
        "nothing-learned": PAY,
        "no-approval": TraceSummary(),
    }
    capabilities = {
        "taught": CapabilityOutcome(capability={"id": "cap-a"}, outcome="learned"),
        "rerun": CapabilityOutcome(capability={"id": "cap-b"}, outcome="rerun"),
    }
    assert _approval_tools(rows, summaries, capabilities) == {
        "cap-a": ["rec:pay", "fs:write"],
        "cap-b": ["rec:pay"],
        "cap-c": ["rec:pay"],
    }
