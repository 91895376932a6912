"""Find personal data and secrets in text: spans of (kind, start, end), no side effects.

Each kind uses a maintained validator where one exists; a regular expression only proposes
candidates: e-mail addresses (a pattern, as no offline library finds them in free text),
phone numbers (``phonenumbers``: valid for their region, written with a ``+`` or with
separators, so bare digit runs such as ids and timestamps are left alone), payment cards
(a known issuer prefix and ``stdnum.luhn``), IBANs (``stdnum.iban``), US SSNs
(``stdnum.us.ssn``), IP addresses (``ipaddress``; loopback and unspecified ones are not
personal) and secrets (the patterns of ``detect-secrets``' plugins, PEM private key blocks,
``Bearer`` credentials, and high-entropy values under key-like names). Names and street
addresses need an NLP model and are not detected (docs/privacy.md).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

import phonenumbers
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from stdnum import iban, luhn
from stdnum.us import ssn


class Kind(StrEnum):
    """What a detected value is; the token names it (``⟨EMAIL_…⟩``)."""

    SECRET = "SECRET"
    EMAIL = "EMAIL"
    IBAN = "IBAN"
    CARD = "CARD"
    SSN = "SSN"
    PHONE = "PHONE"
    IP = "IP"


ALL_KINDS: frozenset[Kind] = frozenset(Kind)


@dataclass(frozen=True, slots=True)
class Span:
    kind: Kind
    start: int
    end: int


# detect-secrets' plugin patterns, with the group that holds the secret (0: the whole match).
_SECRET_PATTERNS: list[tuple[re.Pattern[str], int]] = []
for _plugin in (
    AWSKeyDetector,
    AzureStorageKeyDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    JwtTokenDetector,
    MailchimpDetector,
    OpenAIDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SquareOAuthDetector,
    StripeDetector,
    TwilioKeyDetector,
):
    for _pattern in _plugin().denylist:
        # aws' second pattern captures the key after its context; the others' groups are prefixes.
        _SECRET_PATTERNS.append(
            (_pattern, 1 if _plugin is AWSKeyDetector and _pattern.groups else 0)
        )
for _pattern in BasicAuthDetector().denylist:  # the password of user:password@host
    _SECRET_PATTERNS.append((_pattern, 1))
_SECRET_PATTERNS.append(
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
            re.DOTALL,
        ),
        0,
    )
)
_SECRET_PATTERNS.append((re.compile(r"\bBearer\s+([A-Za-z0-9\-._~+/]{16,}=*)"), 1))
# Test-mode payment keys are credentials too (detect-secrets knows only live ones).
_SECRET_PATTERNS.append((re.compile(r"\b[rs]k_test_[0-9a-zA-Z]{24,}\b"), 0))

# One pass tells whether any secret pattern may match: most strings hold none.
_SECRET_GATE = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _SECRET_PATTERNS), re.DOTALL)
_AWS_CONTEXT = re.compile(r"(?i)aws")

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])"
)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_CARD = re.compile(r"(?<![\d.,-])\d(?:[ -]?\d){12,18}(?!\d|[.,]\d)")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+.:/-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,6}(?:[ .-]\d{1,6}){1,5}(?![\w:/-]|[.,]\d|-\d)"
    r"|(?<![\w+])\+\d{7,15}(?!\w)"
)
_DATE_LIKE = re.compile(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
_IPV6 = re.compile(
    r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:(?<=:)\d{1,3}(?:\.\d{1,3}){3})?(?![\w:])"
)
# Payment card issuers by prefix (ISO/IEC 7812 ranges in use): Visa, Mastercard, Amex,
# Discover, Diners, JCB, UnionPay, Maestro.
_CARD_PREFIX = re.compile(
    r"^(?:4|5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)|3[47]|6011|65|64[4-9]|30[0-5]|36|38|35(?:2[89]|[3-8]\d)|62|5[06-8]|6\d)"
)
_KEYLIKE = re.compile(
    r"(?i)(?:^|[_\-.\s])(?:pass(?:word|wd|phrase)?|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|"
    r"private[_\-]?key|client[_\-]?secret|auth(?:orization)?|credentials?|token|bearer|session[_\-]?key|"
    r"signing[_\-]?key)$"
)
_PASSWORDLIKE = re.compile(r"(?i)(?:pass(?:word|wd|phrase)?|pwd|secret|credentials?)$")
_ENTROPY = Base64HighEntropyString()  # its Shannon entropy over the base64 alphabet
_MIN_SECRET_ENTROPY = 3.0

# Tokens already in the text are never scanned again (shared.privacy.tokens).
TOKEN_PATTERN = re.compile(r"\u27e8([A-Z]{2,12})_([0-9a-f]{16})\u27e9")
_QUICK = re.compile(r"[0-9@:]|BEGIN|Bearer")


def find(text: str, kinds: frozenset[Kind] = ALL_KINDS, *, region: str = "US") -> list[Span]:
    """Every detected value in ``text``, sorted, never overlapping (earlier kinds of ``Kind``
    win); ``region``: where national phone numbers (no ``+`` code) are read."""
    taken: list[tuple[int, int]] = [m.span() for m in TOKEN_PATTERN.finditer(text)]
    spans: list[Span] = []
    quick = _QUICK.search(text) is not None
    for kind in Kind:
        if kind not in kinds:
            continue
        if kind is not Kind.SECRET and not quick:
            break
        found = _phones(text, region) if kind is Kind.PHONE else _DETECTORS[kind](text)
        for start, end in found:
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            spans.append(Span(kind, start, end))
    spans.sort(key=lambda s: s.start)
    return spans


def keyed_secret(key: str, value: str) -> bool:
    """True when ``value`` under the JSON key ``key`` is a credential: any password, or a
    high-entropy value of a key, token or secret field."""
    if not _KEYLIKE.search(key) or len(value) < 8 or TOKEN_PATTERN.fullmatch(value):
        return False
    if _PASSWORDLIKE.search(key):
        return True
    return " " not in value and _ENTROPY.calculate_shannon_entropy(value) >= _MIN_SECRET_ENTROPY


def _secrets(text: str) -> Iterable[tuple[int, int]]:
    if _SECRET_GATE.search(text) is None:
        return
    for pattern, group in _SECRET_PATTERNS:
        if pattern.flags & re.IGNORECASE and _AWS_CONTEXT.search(text) is None:
            continue
        for m in pattern.finditer(text):
            yield m.span(group)


def _emails(text: str) -> Iterable[tuple[int, int]]:
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        yield m.span()


def _ibans(text: str) -> Iterable[tuple[int, int]]:
    for m in _IBAN.finditer(text):
        if iban.is_valid(m.group()):
            yield m.span()


def _cards(text: str) -> Iterable[tuple[int, int]]:
    for m in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and luhn.is_valid(digits):
            yield m.span()


def _ssns(text: str) -> Iterable[tuple[int, int]]:
    for m in _SSN.finditer(text):
        if ssn.is_valid(m.group()):
            yield m.span()


def _phones(text: str, region: str) -> Iterable[tuple[int, int]]:
    for m in _PHONE.finditer(text):
        candidate = m.group()
        digits = sum(c.isdigit() for c in candidate)
        if not 7 <= digits <= 15 or _DATE_LIKE.match(candidate):
            continue
        try:
            number = phonenumbers.parse(candidate, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            yield m.span()


def _ips(text: str) -> Iterable[tuple[int, int]]:
    if "." in text:
        for m in _IPV4.finditer(text):
            if m.start() > 0 and text[m.start() - 1] in "vV":
                continue  # v1.2.3.4 is a version
            if _public_or_private(m.group()):
                yield m.span()
    if text.count(":") >= 2:
        for m in _IPV6.finditer(text):
            if _public_or_private(m.group()):
                yield m.span()


def _public_or_private(candidate: str) -> bool:
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


_DETECTORS: dict[Kind, Callable[[str], Iterable[tuple[int, int]]]] = {
    Kind.SECRET: _secrets,
    Kind.EMAIL: _emails,
    Kind.IBAN: _ibans,
    Kind.CARD: _cards,
    Kind.SSN: _ssns,
    Kind.IP: _ips,
}
