"""The privacy stage's switch: `AGENTCARDS_PII=off` leaves what a run returns and publishes
as it is (the tokenising path is covered on the real stack, tests/integration/e2e/test_privacy.py)."""

from __future__ import annotations

from shared.config import Settings
from shared.executions.status import ExecutionStatus
from shared.sandbox.outcome import ExecutionOutcome
from workers.sandbox.pipeline import privacy
from workers.sandbox.pipeline.context import RunContext

RESULT = {"email": "jane@example.com", "card": "4111 1111 1111 1111"}


def _ctx(mode: str) -> RunContext:
    ctx = RunContext(
        row={"id": "e1", "tenant_id": "acme"},
        settings=Settings(pii=mode, env="test"),  # type: ignore[arg-type]
        redis=None,  # type: ignore[arg-type]
    )
    ctx.outcome = ExecutionOutcome(
        status=ExecutionStatus.SUCCEEDED, result=RESULT, stdout="jane@example.com\n"
    )
    return ctx


def test_off_returns_and_publishes_values_as_they_are() -> None:
    ctx = _ctx("off")
    privacy.tokenize_outcome(ctx)
    assert ctx.outcome is not None
    assert ctx.outcome.result == RESULT and ctx.outcome.stdout == "jane@example.com\n"
    event = {"type": "progress", "message": "at jane@example.com"}
    assert privacy.event_out(ctx, event) == event


def test_events_carry_tokens_by_default(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ctx = _ctx("tokenize")
    ctx.settings = Settings(env="test", home=tmp_path)
    out = privacy.event_out(ctx, {"type": "progress", "message": "at jane@example.com"})
    assert out["message"].startswith("at \u27e8EMAIL_")
    assert ctx.pii is not None and [p.value for p in ctx.pii.produced.values()] == [
        "jane@example.com"
    ]
