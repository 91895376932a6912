"""A request forwarded between replicas carries its caller signed: the holder takes that
caller only under a replica's signature, on a recent message, as it was sent."""

from __future__ import annotations

import time

import pytest

from services.gateway.mcp.replicas.vouched import forward_key, opened, seal
from shared.auth.principal import Principal

KEY = forward_key("a secret every replica shares")
PERSON = Principal(
    tenant_id="acme",
    tool_patterns=("time:*",),
    executions_per_min=60,
    admin=False,
    user="alice",
    scopes=frozenset({"agentcards:read", "agentcards:execute"}),
    groups=("engineers",),
    email="alice@example.com",
    subject_token="sealed:v1:abc",
)
MESSAGE = {"id": "x1", "method": "POST", "path": "/mcp", "body": "{}"}


def test_the_caller_arrives_as_the_receiving_replica_found_it() -> None:
    message, principal = opened(KEY, seal(KEY, MESSAGE, principal=PERSON), max_age_s=120)
    assert principal == PERSON and principal.subject_token == PERSON.subject_token
    assert {k: message[k] for k in MESSAGE} == MESSAGE


def test_a_changed_message_or_another_key_is_refused() -> None:
    sealed = seal(KEY, MESSAGE, principal=PERSON)
    forged = sealed.replace(b'"alice"', b'"mallory"')
    with pytest.raises(ValueError, match="not signed"):
        opened(KEY, forged, max_age_s=120)
    with pytest.raises(ValueError, match="not signed"):
        opened(forward_key("another secret"), sealed, max_age_s=120)
    with pytest.raises(ValueError, match="not signed"):  # as a replica without signing sends it
        opened(KEY, b'{"id": "x1", "principal": {"tenant_id": "acme"}}', max_age_s=120)


def test_an_old_message_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sealed = seal(KEY, MESSAGE, principal=PERSON)
    later = time.time() + 121
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(ValueError, match="lifetime"):
        opened(KEY, sealed, max_age_s=120)
