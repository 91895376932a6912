"""A paused call's arguments are kept sealed and open, for the approver's view, only for
their own approval and with the stack's PII key."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.approvals.store import pending_view, seal_args
from shared.privacy.keys import PiiKeys

KEYS = PiiKeys(current=b"k" * 32)
ARGS = {"amount": 120, "to": "jane.doe@example.com"}


def row(sealed: str, *, tenant_id: str = "acme", call_id: str = "c1") -> dict[str, Any]:
    return {
        "execution_id": "run-1", "call_id": call_id, "tenant_id": tenant_id,
        "tool": "bank:pay", "args": sealed, "policies": ["p"], "approvers": [],
        "expires_at": datetime(2026, 1, 1, tzinfo=UTC),
    }  # fmt: skip


def test_arguments_are_sealed_and_open_only_for_their_approval() -> None:
    sealed = seal_args(KEYS, tenant_id="acme", execution_id="run-1", call_id="c1", args=ARGS)
    assert "jane.doe" not in sealed and "120" not in sealed
    view = pending_view(row(sealed), KEYS)
    assert (view["server"], view["tool"], view["args"]) == ("bank", "pay", ARGS)
    rotated = PiiKeys(current=b"n" * 32, previous=b"k" * 32)
    assert pending_view(row(sealed), rotated)["args"] == ARGS  # during a key rotation
    # Copied to another tenant's or another call's approval, or read without the key: shut.
    assert pending_view(row(sealed, tenant_id="evil"), KEYS)["args"] is None
    assert pending_view(row(sealed, call_id="c2"), KEYS)["args"] is None
    assert pending_view(row(sealed), PiiKeys(current=b"o" * 32))["args"] is None
