"""Detectors: each kind found in realistic text; a corpus of look-alikes left untouched."""

from __future__ import annotations

import pytest

from shared.privacy.detect import ALL_KINDS, WINDOW, Kind, find, keyed_secret
from shared.privacy.tokens import Tokenizer

FOUND = [
    (Kind.EMAIL, "write to jane.doe+crm@example.co.uk today", "jane.doe+crm@example.co.uk"),
    (Kind.PHONE, "call +1 415-555-2671 now", "+1 415-555-2671"),
    (Kind.PHONE, "office (415) 555-2671", "(415) 555-2671"),
    (Kind.PHONE, "mobile +33 6 12 34 56 78", "+33 6 12 34 56 78"),
    (Kind.PHONE, "+447911123456", "+447911123456"),
    (Kind.PHONE, "uk +44 7911 123456.", "+44 7911 123456"),
    (Kind.CARD, "card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    (Kind.CARD, "amex 378282246310005.", "378282246310005"),
    (Kind.CARD, "mc 5555-5555-5555-4444", "5555-5555-5555-4444"),
    (Kind.IBAN, "pay DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00"),
    (Kind.IBAN, "GB82WEST12345698765432", "GB82WEST12345698765432"),
    (Kind.SSN, "ssn 536-22-1234", "536-22-1234"),
    (Kind.IP, "from 203.0.113.7 at noon", "203.0.113.7"),
    (Kind.IP, "client 2001:db8:85a3::8a2e:370:7334", "2001:db8:85a3::8a2e:370:7334"),
    (Kind.SECRET, "aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        Kind.SECRET,
        "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        Kind.SECRET,
        "Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9xYz0123",
        "eyJhbGciOi.JIUzI1NiJ9xYz0123",
    ),
    (Kind.SECRET, "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    (Kind.SECRET, "db postgres://app:s3cr3tPass@db.internal/x", "s3cr3tPass"),
    (
        Kind.SECRET,
        "k -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAA=\n-----END RSA PRIVATE KEY----- end",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAA=\n-----END RSA PRIVATE KEY-----",
    ),
]

# Values agents handle all day that must pass untouched.
LOOKALIKES = [
    "2024-01-15",
    "2024-01-15T10:30:00Z",
    "2024-01-15 10:30:00.123456+00:00",
    "15/01/2024",
    "01-15-2024",
    "10:30:45",
    "1700000000",
    "1700000000123",
    "Mon, 15 Jan 2024 10:30:00 GMT",
    "550e8400-e29b-41d4-a716-446655440000",
    "v1.2.3",
    "3.11.7",
    "version 2.10.4-rc.1",
    "v10.0.0.1",
    "d41d8cd98f00b204e9800998ecf8427e",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "$1,299.99",
    "€ 1 299,00",
    "12.50",
    "-42",
    "3.14159265358979",
    "1234567",
    "order 98765432",
    "id 123456789012",
    "INV-2024-000123",
    "ticket #4521",
    "localhost:8080",
    "127.0.0.1",
    "0.0.0.0",
    "::1",
    "aa:bb:cc:dd:ee:ff",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "page 3 of 17",
    "1 2 3 4 5",
    "ISO 8601",
    "RFC 3339",
    "user_42",
    "tel: n/a",
    "CUST-000042",
    "2001",
    "1e10",
    "0x7ffe5367",
    "lat 48.8566, lon 2.3522",
    "size 1024x768",
    "SKU 4006381333931",
    "P1Y2M10DT2H30M",
    "python3.11 -m pip install ruff==0.5.1",
    "https://example.com/items/12345?page=2",
    "The meeting is at 10:30 in room 204.",
]


@pytest.mark.parametrize(("kind", "text", "value"), FOUND)
def test_each_kind_is_found_with_its_exact_extent(kind: Kind, text: str, value: str) -> None:
    spans = find(text)
    assert [(s.kind, text[s.start : s.end]) for s in spans] == [(kind, value)]


def test_the_false_positive_corpus_passes_untouched() -> None:
    hits = {text: [s.kind.value for s in find(text)] for text in LOOKALIKES}
    flagged = {t: k for t, k in hits.items() if k}
    rate = len(flagged) / len(LOOKALIKES)
    print(f"false-positive rate: {len(flagged)}/{len(LOOKALIKES)} = {rate:.1%}")
    assert flagged == {}


def test_national_numbers_read_in_the_configured_region() -> None:
    assert find("06 12 34 56 78") == []  # not a US number
    assert [s.kind for s in find("06 12 34 56 78", region="FR")] == [Kind.PHONE]


def test_kinds_can_be_narrowed() -> None:
    text = "a@b.io 203.0.113.7"
    assert [s.kind for s in find(text, frozenset({Kind.IP}))] == [Kind.IP]
    assert [s.kind for s in find(text, ALL_KINDS)] == [Kind.EMAIL, Kind.IP]


def test_credentials_under_key_like_names() -> None:
    assert keyed_secret("api_key", "x8Kq2LmP9zR4tV7w")
    assert keyed_secret("password", "hunter22")
    assert keyed_secret("Authorization", "Zm9vOmJhcjEyMzQ1Njc4")
    assert not keyed_secret("api_key", "aaaaaaaaaaaa")  # no entropy: a placeholder
    assert not keyed_secret("name", "x8Kq2LmP9zR4tV7w")
    assert not keyed_secret("token_count", "x8Kq2LmP9zR4tV7w")


def test_lookalikes_inside_json_stay_byte_identical() -> None:
    record = {"created": "2024-01-15T10:30:00Z", "id": "550e8400-e29b-41d4-a716-446655440000",
              "price": "$1,299.99", "version": "v1.2.3", "n": 1700000000, "tags": LOOKALIKES}  # fmt: skip
    tok = Tokenizer(b"k" * 32)
    assert tok.value(record) == record
    assert tok.produced == {}


def test_a_long_text_is_read_in_windows_without_losing_values_at_their_edges() -> None:
    values = ["jane.doe@example.com", "4111 1111 1111 1111", "+1 415-555-2671"]
    pieces, expected, at = [], [], 0
    for i in range(40):  # values land on and around every window boundary
        filler = "x " * ((WINDOW // 2 - 7 + i * 3) // 2)
        value = values[i % len(values)]
        pieces += [filler, value, " "]
        expected.append((at + len(filler), value))
        at += len(filler) + len(value) + 1
    text = "".join(pieces)
    assert len(text) > 10 * WINDOW
    assert [(s.start, text[s.start : s.end]) for s in find(text)] == expected


def test_a_short_string_read_again_gets_the_same_answer_and_no_value_is_kept() -> None:
    """Clean short strings are remembered across calls (a trace repeats its keys and ids);
    a value that was found is found again every time, and never kept in memory."""
    from shared.privacy import detect

    for kind, text, value in FOUND:
        first, again = find(text, ALL_KINDS), find(text, ALL_KINDS)
        assert first == again and any(text[s.start : s.end] == value for s in again), kind
        assert not any(value in key[0] for key in detect._clean), kind
    for text in LOOKALIKES:
        assert find(text, ALL_KINDS) == find(text, ALL_KINDS) == []
    # Narrowed kinds are their own question: a string clean of e-mails may hold a card.
    card = "card 4111 1111 1111 1111"
    assert find(card, frozenset({Kind.EMAIL})) == []
    assert [s.kind for s in find(card, ALL_KINDS)] == [Kind.CARD]


def test_the_memory_of_clean_strings_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.privacy import detect

    monkeypatch.setattr(detect, "CLEAN_KEPT", 10)
    for i in range(25):
        assert find(f"plain word {i}", ALL_KINDS) == []
        assert len(detect._clean) <= 10
