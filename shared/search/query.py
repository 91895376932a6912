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


# A request's payload, which names what to act on rather than the action: quoted text (an
# apostrophe inside a word, "Bob's", is not a quote), and whatever follows "that", a colon
# or a dash ("note that Alice is allergic to nuts", "save: Bob is Carol's manager").
_QUOTED = re.compile(r"(?<!\w)['\"\u2018\u201c][^'\"\u2019\u201d]+['\"\u2019\u201d](?!\w)")
_PAYLOAD_START = re.compile(r":\s|\s[-\u2013\u2014]\s|\bthat\b", re.IGNORECASE)


# What stands in for the payload in the frame: the action keeps its object's kind ("store
# this fact"), which a bare verb loses ("store" alone is as near "delete" as "add").
PAYLOAD_AS = "this fact"
QUOTED_AS = "this text"


# A question asks about what it names ("what is the Imjin war", "which tools does git have"):
# its first word, or its last character.
_QUESTION = re.compile(
    r"^\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|"
    r"could|would|should|will|shall|may|might|has|have|had)\b|\?\s*$",
    re.IGNORECASE,
)


def query_frame(query: str) -> str | None:
    """The action of a request that states a payload, without it: ``PAYLOAD_AS`` for what
    followed "that", a colon or a dash (``_PAYLOAD_START``), ``QUOTED_AS`` for quoted text
    (``_QUOTED``), and no names or numbers (words after the first that start with a capital
    or a digit). The payload's people and facts outweigh the action in one embedding of the
    whole request ("note that Priya moved to the Lisbon office" is near no tool at all); the
    frame ("note this fact") keeps only what the request asks to do.

    None for a request that states no payload, for a question (``_QUESTION``: what it names
    is what it asks about, and "what is the Imjin war" without its names is "what is war"),
    for a multi-step request (its steps are searched as clauses, and without its capitalised
    words it is noise: LiveMCPBench's questions), and when nothing of the action is left
    (research/notes/search-history.md, issue 49 §4, rounds three to five)."""
    if query_clauses(query) or _QUESTION.search(query):
        return None
    quoted = _QUOTED.sub(f" {QUOTED_AS} ", query)
    parts = _PAYLOAD_START.split(quoted, maxsplit=1)
    if len(parts) == 1 and quoted == query:
        return None  # no payload stated
    words = [
        w
        for i, w in enumerate(parts[0].split())
        if i == 0 or not (w[:1].isupper() or w[:1].isdigit())
    ]
    if not words:
        return None
    frame = " ".join([*words, *([PAYLOAD_AS] if len(parts) > 1 else [])])
    return frame if frame.lower() != " ".join(query.split()).lower() else None


# A request that asks to take something away: delete, remove, forget, erase… (any form), or
# "get rid of"; "don't forget"/"never forget" ask the opposite. Written from English, not
# fitted on any set.
_REMOVAL = re.compile(
    r"\b(?:(?P<negated>(?:don['\u2019]?t|do not|never|not)\s+)?(?:delet|remov|forg[eo]t|eras|purg|"
    r"wipe|wiping|discard|destroy|reset|undo|unstag|revert|cancel|uninstall|unsubscrib|"
    r"unlink|retract|expung|get rid of)\w*)",
    re.IGNORECASE,
)


def asks_removal(query: str) -> bool:
    """Whether the request asks to remove, delete or forget something (``_REMOVAL``)."""
    return any(not m.group("negated") for m in _REMOVAL.finditer(query))


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
