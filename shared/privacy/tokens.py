"""Tokens in place of detected values, and back: pure functions over JSON values.

A token reads ``⟨EMAIL_1f3a9c0d7e2b4a68⟩``: the kind, then 16 hex digits of an HMAC-SHA256
of the kind and the value under the tenant's token key (``shared.privacy.keys``), so the
same value gives the same token within one tenant and key period, and nothing is learnt
from a token without the vault. The angle brackets (U+27E8, U+27E9) do not occur in data
an agent would type, are kept by JSON (escaped or not) and by Python string literals.

JSON is walked with an explicit stack: nesting costs no recursion.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.privacy.detect import ALL_KINDS, TOKEN_PATTERN, Kind, find, keyed_secret


def make_token(key: bytes, kind: str, value: str) -> str:
    """The token of ``value`` of ``kind`` under ``key`` (one tenant's token key)."""
    digest = hmac.new(key, f"{kind}\x00{value}".encode(), hashlib.sha256).hexdigest()
    return f"\u27e8{kind}_{digest[:16]}\u27e9"


@dataclass(frozen=True, slots=True)
class Produced:
    """One token a run produced: its kind, the real value and the tool it came from."""

    kind: str
    value: str
    tool: str | None


@dataclass
class Tokenizer:
    """Replaces detected values with tokens and remembers what it replaced (for the vault)."""

    key: bytes
    kinds: frozenset[Kind] = ALL_KINDS
    produced: dict[str, Produced] = field(default_factory=dict)
    region: str = "US"  # where national phone numbers are read (AGENTCARDS_PII_PHONE_REGION)
    # Strings already scanned (a tool's result is scanned when it arrives, to know the tool,
    # and again in the outcome): the second time costs a lookup.
    _seen: dict[tuple[frozenset[Kind], str], str] = field(default_factory=dict, repr=False)

    def text(
        self,
        text: str,
        *,
        key: str | None = None,
        tool: str | None = None,
        kinds: frozenset[Kind] | None = None,
    ) -> str:
        """``text`` with each detected value replaced; ``key``: the JSON key it is the value
        of; ``tool``: the tool whose data it is, if known; ``kinds``: instead of ``self.kinds``."""
        kinds = self.kinds if kinds is None else kinds
        if not kinds:
            return text
        if key is not None and Kind.SECRET in kinds and keyed_secret(key, text):
            return self._token(Kind.SECRET, text, tool)
        done = self._seen.get((kinds, text))
        if done is not None:
            return done
        spans = find(text, kinds, region=self.region)
        if not spans:
            self._seen[(kinds, text)] = text
            return text
        parts: list[str] = []
        at = 0
        for span in spans:
            parts.append(text[at : span.start])
            parts.append(self._token(span.kind, text[span.start : span.end], tool))
            at = span.end
        parts.append(text[at:])
        self._seen[(kinds, text)] = out = "".join(parts)
        return out

    def value(
        self, value: Any, *, tool: str | None = None, kinds: frozenset[Kind] | None = None
    ) -> Any:
        """A JSON value with every string (dict keys too) tokenised; a new value, same shape."""
        if tool is None and kinds is None:
            return map_strings(value, self.text)
        return map_strings(value, lambda s, key=None: self.text(s, key=key, tool=tool, kinds=kinds))

    def _token(self, kind: Kind, value: str, tool: str | None) -> str:
        token = make_token(self.key, kind.value, value)
        known = self.produced.get(token)
        if known is None or (known.tool is None and tool is not None):
            self.produced[token] = Produced(kind.value, value, tool)
        return token


def map_strings(value: Any, fn: Callable[..., str]) -> Any:
    """``value`` (JSON) with ``fn(s, key=k)`` applied to each string: ``k`` is the dict key a
    value string sits under (None for keys themselves and list items). Iterative."""
    if isinstance(value, str):
        return fn(value, key=None)
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        if isinstance(source, dict):
            for k, v in source.items():
                new_key = fn(k, key=None) if isinstance(k, str) else k
                target[new_key] = _child(v, fn, k if isinstance(k, str) else None, stack)
        else:
            for v in source:
                target.append(_child(v, fn, None, stack))
    return root


def _child(v: Any, fn: Callable[..., str], key: str | None, stack: list[tuple[Any, Any]]) -> Any:
    if isinstance(v, str):
        return fn(v, key=key)
    if isinstance(v, dict):
        new: Any = {}
    elif isinstance(v, list):
        new = []
    else:
        return v
    stack.append((v, new))
    return new


def tokens_in(value: Any) -> set[str]:
    """Every token-shaped string in a JSON value (keys and values)."""
    found: set[str] = set()

    def collect(s: str, key: str | None = None) -> str:
        if "\u27e8" in s:
            found.update(m.group() for m in TOKEN_PATTERN.finditer(s))
        return s

    map_strings(value, collect)
    return found


def replace_tokens(value: Any, real: dict[str, str]) -> Any:
    """``value`` with each token found in ``real`` replaced by its real value; others stay."""
    if not real:
        return value

    def swap(s: str, key: str | None = None) -> str:
        if "\u27e8" not in s:
            return s
        return TOKEN_PATTERN.sub(lambda m: real.get(m.group(), m.group()), s)

    return map_strings(value, swap)


def kinds_of(names: Iterable[str]) -> frozenset[Kind]:
    """The kinds named (``EMAIL``, ``phone``…); an unknown name is a ValueError naming it."""
    kinds = set()
    for name in names:
        try:
            kinds.add(Kind(name.upper()))
        except ValueError:
            known = ", ".join(k.value for k in Kind)
            raise ValueError(f"unknown PII kind {name!r} (known: {known})") from None
    return frozenset(kinds)
