"""Query preprocessing for tool search: split a multi-step request into clauses, tokenise words."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Clause boundaries in a request like "find X, summarise it and then write a PDF":
# sentence punctuation, commas, and the connectives that chain steps. Each step
# usually needs its own tool, and one embedding of the whole request blurs them.
_CLAUSE_SPLIT = re.compile(
    r"(?:[.;:!?]\s+|,\s*(?:and\s+|then\s+)?|\s+(?:and then|then|and|including|as well as|"
    r"after that|so that|in order to|which|with)\s+)",
    re.IGNORECASE,
)
MAX_CLAUSES = 4  # each clause costs one more embedding and one more vector search
MIN_CLAUSE_WORDS = 2  # "and PDF" alone is too short to embed meaningfully
# A word of a stemmed lexeme: letters/digits of any script, no punctuation, so it can
# be passed to to_tsquery safely.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_clauses(query: str) -> list[str]:
    """The request's steps worth embedding on their own; [] when it is a single step."""
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(query) if p and p.strip()]
    parts = [p for p in parts if len(p.split()) >= MIN_CLAUSE_WORDS]
    return parts[:MAX_CLAUSES] if len(parts) > 1 else []


def lexeme_words(lexemes: Sequence[str]) -> list[str]:
    """Split Postgres lexemes ('well-format', 'report.pdf') into plain, query-safe words."""
    words: dict[str, None] = {}
    for lexeme in lexemes:
        for word in _WORD.findall(lexeme.lower()):
            words[word] = None
    return list(words)
