"""Tokens: stable per tenant and period, different across tenants, reversible, any depth."""

from __future__ import annotations

import json

from shared.privacy.detect import TOKEN_PATTERN
from shared.privacy.keys import PiiKeys, decode_key, ensure_key_file
from shared.privacy.tokens import Tokenizer, replace_tokens, tokens_in

KEYS = PiiKeys(current=b"\x01" * 32, ttl_s=3600)
RECORD = {
    "name": "Jane Doe",
    "email": "jane@example.com",
    "phone": "+1 415-555-2671",
    "card": "4111 1111 1111 1111",
    "iban": "DE89 3704 0044 0532 0130 00",
    "ssn": "536-22-1234",
    "api_key": "x8Kq2LmP9zR4tV7w",
    "note": "reach jane@example.com",
}


def test_a_record_comes_out_with_tokens_and_goes_back_whole() -> None:
    tok = Tokenizer(KEYS.token_key("acme", now=0))
    out = tok.value(RECORD)
    assert out["name"] == "Jane Doe"  # names are not detected (docs/privacy.md)
    for field in ("email", "phone", "card", "iban", "ssn", "api_key"):
        assert TOKEN_PATTERN.fullmatch(out[field]), field
    assert out["note"] == f"reach {out['email']}"  # same value, same token
    assert json.loads(json.dumps(out)) == out  # survives JSON, escaped or not
    assert json.loads(json.dumps(out, ensure_ascii=False)) == out
    real = {t: p.value for t, p in tok.produced.items()}
    assert replace_tokens(out, real) == RECORD
    assert tokens_in(out) == set(real)


def test_tokens_are_per_tenant_and_per_period() -> None:
    acme = Tokenizer(KEYS.token_key("acme", now=0)).text("jane@example.com")
    again = Tokenizer(KEYS.token_key("acme", now=3599)).text("jane@example.com")
    other = Tokenizer(KEYS.token_key("globex", now=0)).text("jane@example.com")
    later = Tokenizer(KEYS.token_key("acme", now=3600)).text("jane@example.com")
    assert acme == again
    assert acme != other
    assert acme != later
    assert KEYS.expires_at(now=10) == 7200.0  # resolvable at least one whole period


def test_a_token_is_not_tokenised_again_and_unknown_tokens_stay() -> None:
    tok = Tokenizer(KEYS.token_key("acme"))
    made_up = "\u27e8EMAIL_0123456789abcdef\u27e9"
    assert tok.text(f"x {made_up} y") == f"x {made_up} y"
    assert replace_tokens({"to": made_up}, {}) == {"to": made_up}


def test_nesting_far_past_the_recursion_limit() -> None:
    deep: list[object] = []
    inner = deep
    for _ in range(50_000):
        nxt: list[object] = []
        inner.append(nxt)
        inner = nxt
    inner.append({"mail": "jane@example.com"})
    tok = Tokenizer(KEYS.token_key("acme"))
    out = tok.value(deep)
    node = out
    for _ in range(50_000):
        node = node[0]
    assert TOKEN_PATTERN.fullmatch(node[0]["mail"])


def test_the_key_file_is_created_once_and_read_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    first = ensure_key_file(tmp_path / "home")
    content = first.read_text()
    assert ensure_key_file(tmp_path / "home").read_text() == content
    assert len(decode_key(content)) == 32
    assert oct(first.stat().st_mode & 0o777) == "0o600"
