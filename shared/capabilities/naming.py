"""Readable capability names and descriptions from the intent and tools used (no LLM)."""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Sequence

# Client tool names must match ^[A-Za-z0-9_-]{1,64}$ (ARCHITECTURE.md), and inline
# capabilities are called as `capabilities.<name>(...)`, so names are also Python
# identifiers: lowercase snake_case, no leading digit, never a keyword.
MAX_NAME_LEN = 64
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
# Words kept from the intent: enough to tell capabilities apart in a list, short
# enough to read as a function name.
MAX_NAME_WORDS = 6
# Descriptions are shown in tool lists and search results; one or two sentences.
MAX_DESCRIPTION_LEN = 300

# English and French filler (intents are written in either); dropped from names only.
_STOPWORD_TEXT = """a an the and or of to for from in on at by with into onto about as is are be
    this that these those it its my our your their me us some any all please then
    using use via i we you want need would like can could should will just also
    le la les un une des du de d l et ou en au aux pour par sur dans avec sans ce cet
    cette ces mon ma mes son sa ses je nous vous puis"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD_RE = re.compile(r"[a-z0-9]+")


def capability_name(*, intent: str, tools_used: Sequence[str]) -> str:
    """A snake_case name from the intent's content words (else the tools); always valid."""
    words = [w for w in _words(intent) if w not in _STOPWORDS] or _words(intent)
    if not words:
        words = [w for tool in tools_used[:3] for w in _words(tool.replace(":", " "))]
    if not words:
        return "capability"
    name = ""
    for word in words[:MAX_NAME_WORDS]:
        candidate = f"{name}_{word}" if name else word
        if len(candidate) > MAX_NAME_LEN:
            break
        name = candidate
    name = name or words[0][:MAX_NAME_LEN]
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"_{name}"[:MAX_NAME_LEN]
    return name


def unique_name(*, name: str, code_hash: str) -> str:
    """The name with a short code-hash suffix, for when another capability already has it."""
    # 8 hex digits: 4 billion values, ample within one tenant's capabilities.
    suffix = f"_{code_hash[:8]}"
    return name[: MAX_NAME_LEN - len(suffix)] + suffix


def capability_description(*, intent: str, tools_used: Sequence[str]) -> str:
    """The intent as a sentence, plus the tools it calls, e.g. "Read a file. Uses fs:read."."""
    text = " ".join(intent.split())
    if text:
        text = text[0].upper() + text[1:]
        if text[-1] not in ".!?":
            text += "."
    if tools_used:
        text = f"{text} Uses {', '.join(dict.fromkeys(tools_used))}.".strip()
    elif not text:
        text = "Learned capability."
    if len(text) > MAX_DESCRIPTION_LEN:
        text = text[: MAX_DESCRIPTION_LEN - 1].rstrip() + "…"
    return text


def _words(text: str) -> list[str]:
    # NFKD + ASCII drops accents (é → e) instead of dropping the whole letter.
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _WORD_RE.findall(ascii_text.lower())
