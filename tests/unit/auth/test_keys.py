"""API key material, option parsing, audit hashing and the bearer/loopback rules (pure logic)."""

from __future__ import annotations

import hashlib

import pytest

from services.gateway.auth import (
    anonymous_or_refuse,
    bearer_token,
    bind_refusal,
    is_loopback,
)
from shared.auth.audit import args_hash
from shared.auth.cache import PrincipalCache
from shared.auth.keys import (
    check_tenant,
    check_tool_patterns,
    hash_key,
    looks_like_key,
    new_key,
    parse_per_minute,
    shown_prefix,
)
from shared.auth.principal import ANONYMOUS
from shared.config import Settings
from shared.errors import Unauthorized


def test_keys_are_prefixed_high_entropy_and_stored_as_sha256() -> None:
    keys = {new_key() for _ in range(1000)}
    assert len(keys) == 1000
    key = keys.pop()
    assert key.startswith("ack_") and len(key) == 4 + 43 and looks_like_key(key)
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert key not in hash_key(key)
    assert shown_prefix(key) == key[:12]


@pytest.mark.parametrize(
    "token", ["", "ack_short", "sk_" + "a" * 43, "ack_" + "a" * 42 + "!", "ack_" + "a" * 44]
)
def test_malformed_tokens_are_not_keys(token: str) -> None:
    assert not looks_like_key(token)
    assert PrincipalCache().cached(token) is None  # refused without a lookup


def test_tool_patterns_accept_ids_and_globs_and_name_the_bad_one() -> None:
    assert check_tool_patterns(None) is None
    assert check_tool_patterns(["fs:*", "time:get_current_time", "*:read_*", "fs:*"]) == (
        "fs:*",
        "time:get_current_time",
        "*:read_*",
    )
    with pytest.raises(ValueError, match="'no-colon'"):
        check_tool_patterns(["fs:*", "no-colon"])
    with pytest.raises(ValueError, match="tool patterns look like"):
        check_tool_patterns(["fs:read file"])


def test_tenant_ids_are_checked() -> None:
    assert check_tenant("acme-1") == "acme-1"
    for bad in ("", "-x", "a b", "x" * 65, "t\x00"):
        with pytest.raises(ValueError, match="tenant ids are"):
            check_tenant(bad)


@pytest.mark.parametrize(("text", "value"), [("60/min", 60), ("5", 5), (" 7 / minute ", 7)])
def test_rates_parse(text: str, value: int) -> None:
    assert parse_per_minute(text, option="--rate") == value


@pytest.mark.parametrize("text", ["0/min", "ten", "5/s", "-1"])
def test_bad_rates_name_the_option(text: str) -> None:
    with pytest.raises(ValueError, match="--rate"):
        parse_per_minute(text, option="--rate")


def test_audit_hash_is_canonical_json() -> None:
    assert args_hash({"b": 1, "a": [1, "é"]}) == args_hash({"a": [1, "é"], "b": 1})
    assert args_hash({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()
    assert args_hash({"a": 1}) != args_hash({"a": 2})


def test_bearer_header_parsing() -> None:
    assert bearer_token([]) is None
    assert bearer_token([(b"authorization", b"Bearer ack_x")]) == "ack_x"
    assert bearer_token([(b"authorization", b"bearer  ack_x ")]) == "ack_x"
    with pytest.raises(Unauthorized, match="Bearer <API key>"):
        bearer_token([(b"authorization", b"Basic dXNlcjpwdw==")])


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", None))


def test_without_keys_only_loopback_serving_is_anonymous() -> None:
    assert anonymous_or_refuse(keys_exist=False, loopback_only=True) is ANONYMOUS
    with pytest.raises(Unauthorized, match="agentcards keys create"):
        anonymous_or_refuse(keys_exist=False, loopback_only=False)
    with pytest.raises(Unauthorized, match="requires an API key"):
        anonymous_or_refuse(keys_exist=True, loopback_only=True)


def test_bind_refusal_names_the_ways_out() -> None:
    public = Settings(gateway_host="0.0.0.0", env="test")
    message = bind_refusal(public, keys_exist=False)
    assert message is not None
    assert "agentcards keys create" in message and "AGENTCARDS_AUTH=off" in message
    assert bind_refusal(public, keys_exist=True) is None
    assert (
        bind_refusal(Settings(gateway_host="0.0.0.0", auth=False, env="test"), keys_exist=False)
        is None
    )
    assert bind_refusal(Settings(env="test"), keys_exist=False) is None
