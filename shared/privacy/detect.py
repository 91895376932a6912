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

import bisect
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import phonenumbers
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
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
_ORDER = tuple(Kind)  # the order detectors claim text in


@dataclass(frozen=True, slots=True)
class Span:
    kind: Kind
    start: int
    end: int


# detect-secrets' plugin patterns, each with the literals one of which any match contains
# (a substring test skips the pattern for almost every string) and the group holding the
# secret (0: the whole match; aws' second pattern captures the key after its context).
_SECRET_HINTS: dict[type, tuple[str, ...]] = {
    AWSKeyDetector: ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"),
    AzureStorageKeyDetector: ("AccountKey=",),
    GitHubTokenDetector: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    GitLabTokenDetector: ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-"),
    JwtTokenDetector: ("eyJ",),
    MailchimpDetector: ("-us",),
    OpenAIDetector: ("T3BlbkFJ",),
    PypiTokenDetector: ("pypi-",),
    SendGridDetector: ("SG.",),
    SlackDetector: ("xox", "hooks.slack.com"),
    SquareOAuthDetector: ("sq0csp-",),
    StripeDetector: ("k_live_",),
    TwilioKeyDetector: ("AC", "SK"),
    BasicAuthDetector: ("://",),  # the password of user:password@host
}
_SECRET_PATTERNS: list[tuple[re.Pattern[str], int, tuple[str, ...]]] = []
for _plugin, _hints in _SECRET_HINTS.items():
    for _pattern in _plugin().denylist:
        if _plugin is AWSKeyDetector and _pattern.groups:
            _SECRET_PATTERNS.append((_pattern, 1, ("aws", "AWS", "Aws")))
        else:
            _SECRET_PATTERNS.append((_pattern, 1 if _plugin is BasicAuthDetector else 0, _hints))
_SECRET_PATTERNS += [
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
            re.DOTALL,
        ),
        0,
        ("PRIVATE KEY",),
    ),
    (re.compile(r"\bBearer\s+([A-Za-z0-9\-._~+/]{16,}=*)"), 1, ("Bearer",)),
    # Test-mode payment keys are credentials too (detect-secrets knows only live ones).
    (re.compile(r"\b[rs]k_test_[0-9a-zA-Z]{24,}\b"), 0, ("k_test_",)),
]

# One pass over the text for all the hints: most strings hold none.
_SECRET_HINT = re.compile(
    "|".join(sorted({re.escape(h) for *_, hs in _SECRET_PATTERNS for h in hs}))
)

# Patterns start with the character class of their first character and check what comes
# before it after that character: the regular expression engine then skips quickly to
# candidates (a leading look-behind would be tried at every position).
# An e-mail is found from its "@domain", then its local part is read backwards.
_EMAIL_DOMAIN = re.compile(r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])")
_EMAIL_LOCAL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}\Z")
_IBAN = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_CARD = re.compile(r"\d(?<![\d.,-]\d)(?:[ -]?\d){12,18}(?!\d|[.,]\d)")
_SSN = re.compile(r"\d(?<![\d-]\d)\d{2}-\d{2}-\d{4}(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+.:/-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,6}(?:[ .-]\d{1,6}){1,5}(?![\w:/-]|[.,]\d|-\d)"
    r"|(?<![\w+])\+\d{7,15}(?!\w)"
)
_DIGIT = re.compile(r"\d")
_DATE_LIKE = re.compile(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$")
_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w.])")
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
    win); ``region``: where national phone numbers (no ``+`` code) are read.

    A long text is scanned in windows of ``WINDOW`` characters (each read with ``CONTEXT``
    characters before and after it, so values across a boundary are found whole): one
    regular expression call over megabytes would hold the GIL for seconds, and the worker's
    liveness heartbeat (a thread) would miss its beat.
    """
    if len(text) <= CLEAN_MAX_CHARS:
        return _find_short(text, kinds, region)
    if len(text) <= WINDOW + CONTEXT:
        return _find(text, kinds, region)
    spans: list[Span] = []
    for start in range(0, len(text), WINDOW):
        left = max(0, start - CONTEXT)
        part = text[left : start + WINDOW + CONTEXT]
        for span in _find(part, kinds, region):
            at = left + span.start
            if start <= at < start + WINDOW and (not spans or at >= spans[-1].end):
                spans.append(Span(span.kind, at, left + span.end))
    return spans


WINDOW = 32 * 1024
CONTEXT = 4 * 1024  # longer than a value we detect (a 4096-bit RSA key in PEM is ~3.3 KB)

# Short strings found clean are remembered, process-wide (at most ``CLEAN_KEPT``, all
# forgotten when full): a tool's results and a run's trace repeat the same keys, names and
# ids call after call, each scanned by every detector (2-7 µs apiece, ~0.1 ms of a direct
# call). Only clean strings are kept: a detected value is never held past its call.
CLEAN_MAX_CHARS = 256
CLEAN_KEPT = 8192
_clean: dict[tuple[str, frozenset[Kind], str], None] = {}


def _find_short(text: str, kinds: frozenset[Kind], region: str) -> list[Span]:
    key = (text, kinds, region)
    if key in _clean:
        return []
    spans = _find(text, kinds, region)
    if not spans:
        if len(_clean) >= CLEAN_KEPT:
            _clean.clear()
        _clean[key] = None
    return spans


def _find(text: str, kinds: frozenset[Kind], region: str) -> list[Span]:
    taken = _Taken()
    for m in TOKEN_PATTERN.finditer(text):
        taken.add(*m.span())
    spans: list[Span] = []
    quick = _QUICK.search(text) is not None
    for kind in _ORDER:
        if kind not in kinds:
            continue
        if kind is not Kind.SECRET and not quick:
            break
        found = _phones(text, region) if kind is Kind.PHONE else _DETECTORS[kind](text)
        for start, end in found:
            if taken.add(start, end):
                spans.append(Span(kind, start, end))
    spans.sort(key=lambda s: s.start)
    return spans


class _Taken:
    """Disjoint spans already claimed, sorted: an overlap check costs a binary search."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> bool:
        """Claim [start, end) unless it overlaps a claimed span; True when claimed."""
        i = bisect.bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return False
        if i < len(self.starts) and self.starts[i] < end:
            return False
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        return True


def keyed_secret(key: str, value: str) -> bool:
    """True when ``value`` under the JSON key ``key`` is a credential: any password, or a
    high-entropy value of a key, token or secret field."""
    if not _KEYLIKE.search(key) or len(value) < 8 or TOKEN_PATTERN.fullmatch(value):
        return False
    if _PASSWORDLIKE.search(key):
        return True
    return " " not in value and _ENTROPY.calculate_shannon_entropy(value) >= _MIN_SECRET_ENTROPY


def _secrets(text: str) -> Iterable[tuple[int, int]]:
    if _SECRET_HINT.search(text) is None:
        return
    for pattern, group, hints in _SECRET_PATTERNS:
        if any(h in text for h in hints):
            for m in pattern.finditer(text):
                yield m.span(group)


def _emails(text: str) -> Iterable[tuple[int, int]]:
    if "@" not in text:
        return
    for m in _EMAIL_DOMAIN.finditer(text):
        at = m.start()
        local = _EMAIL_LOCAL.search(text, max(0, at - 65), at)
        if local is not None:
            yield local.start(), m.end()


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
        digits = len(_DIGIT.findall(candidate))
        if (
            7 <= digits <= 15
            and not _DATE_LIKE.match(candidate)
            and _valid_phone(candidate, region)
        ):
            yield m.span()


@lru_cache(maxsize=65_536)
def _valid_phone(candidate: str, region: str) -> bool:
    """``phonenumbers``' validation (~0.3 ms; the same numbers recur across results)."""
    try:
        return bool(phonenumbers.is_valid_number(phonenumbers.parse(candidate, region)))
    except phonenumbers.NumberParseException:
        return False


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
