"""The privacy stage's switches: `AGENTCARDS_PII=off`, or a key created with `--pii off`,
leave what a run returns and publishes as it is (the tokenising path is covered on the real stack, tests/integration/e2e/test_privacy.py)."""

from __future__ import annotations

import pytest

from shared.auth.grants import Grant
from shared.auth.principal import Principal
from shared.auth.store import issue_key, principal_from_row
from shared.config import Settings
from shared.errors import ValidationFailed
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


# Per-key opt-out (`agentcards keys create --pii off`): the submitting key's setting reaches
# the run through its grant record.


def test_the_decision_stack_setting_then_the_key() -> None:
    opted_out = Grant(tenant_id="acme", key_id="k1", pii="off")
    normal = Grant(tenant_id="acme", key_id="k2")
    assert privacy.tokenizes("tokenize", normal)
    assert privacy.tokenizes("tokenize", None)  # no grant record: no opt-out (fail closed)
    assert not privacy.tokenizes("tokenize", opted_out)
    assert not privacy.tokenizes("off", normal)
    assert not privacy.tokenizes("off", opted_out)


def test_a_key_that_opted_out_gets_values_and_events_as_they_are(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ctx = _ctx("tokenize")
    ctx.settings = Settings(env="test", home=tmp_path)
    ctx.grant = Grant(tenant_id="acme", key_id="k1", pii="off")
    privacy.tokenize_outcome(ctx)  # no vault write (no database here): nothing tokenised
    assert ctx.outcome is not None
    assert ctx.outcome.result == RESULT and ctx.outcome.stdout == "jane@example.com\n"
    event = {"type": "progress", "message": "at jane@example.com"}
    assert privacy.event_out(ctx, event) == event
    assert ctx.pii is None


def test_the_keys_setting_travels_in_the_grant_record() -> None:
    off = Principal(tenant_id="acme", key_id="k1", pii="off")
    grant = Grant.for_principal(off, tools=None)
    assert grant.pii_off and Grant.decode(grant.encode()).pii_off
    plain = Grant.for_principal(Principal(tenant_id="acme", key_id="k2"), tools=None)
    assert not Grant.decode(plain.encode()).pii_off
    # A record without the field (an older gateway's) or with anything but "off": tokenised.
    assert not Grant.decode(b'{"v": 1, "tenant_id": "acme"}').pii_off
    assert not Grant.decode(b'{"v": 1, "tenant_id": "acme", "pii": "OFF"}').pii_off


def test_a_key_rows_pii_column_makes_its_principal() -> None:
    row = {
        "id": "00000000-0000-0000-0000-000000000001",
        "tenant_id": "acme",
        "tool_patterns": None,
        "executions_per_min": None,
        "tool_calls_per_min": None,
        "max_concurrent": None,
        "admin": False,
    }
    assert not principal_from_row(row).pii_off  # a row read before migration 0021
    assert principal_from_row({**row, "pii": "off"}).pii_off
    assert not principal_from_row({**row, "pii": "tokenize"}).pii_off


def test_an_unknown_pii_setting_is_refused_before_any_write() -> None:
    with pytest.raises(ValidationFailed, match="pii must be one of"):
        issue_key(None, tenant_id="acme", pii="none")  # type: ignore[arg-type]
