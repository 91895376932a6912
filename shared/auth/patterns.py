"""Tool allow-lists: patterns over ``server:tool`` ids, checked once and matched many times.

A pattern is ``server:tool`` where either part may hold the globs ``*`` (any run of
characters, never crossing the ``:``) and ``?`` (one character): ``time:*``,
``example:add``, ``*:get_*``, ``git:git_?iff``. A lone ``*`` means every tool. Patterns
match real tool ids (``my-server:get-sum``), not the Python names agent code writes
(``mcp.my_server.get_sum``). Pure and stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from shared import tool_ids
from shared.errors import ValidationFailed

MAX_PATTERN_CHARS = 200
MAX_PATTERNS = 100

PATTERN_RULE = (
    "tool patterns look like 'server:tool', 'server:*' or globs over server:tool ids "
    "('*' matches any run of characters, '?' one character; a lone '*' is every tool); "
    "server parts hold letters, digits, '_', '-', tool parts also '.'"
)

_SERVER_GLOB = re.compile(r"^[A-Za-z0-9_*?-]{1,64}$")
_TOOL_GLOB = re.compile(r"^[A-Za-z0-9_.*?-]{1,128}$")


class InvalidToolPattern(ValidationFailed):
    """Raised when a tool pattern breaks PATTERN_RULE; names the pattern."""


def _glob(part: str) -> str:
    return "".join("[^:]*" if c == "*" else "[^:]" if c == "?" else re.escape(c) for c in part)


def check_pattern(pattern: str) -> str:
    """The pattern as given when it follows PATTERN_RULE; InvalidToolPattern naming it otherwise."""
    if not isinstance(pattern, str):
        raise InvalidToolPattern(f"a tool pattern must be a string, not {type(pattern).__name__}")
    if pattern == "*":
        return pattern
    shown = pattern[:MAX_PATTERN_CHARS]
    server, colon, tool = pattern.partition(":")
    if (
        len(pattern) > MAX_PATTERN_CHARS
        or not colon
        or not _SERVER_GLOB.match(server)
        or not _TOOL_GLOB.match(tool)
    ):
        raise InvalidToolPattern(
            f"invalid tool pattern {shown!r}: {PATTERN_RULE}", field="tool_patterns", pattern=shown
        )
    return pattern


@dataclass(frozen=True, slots=True)
class ToolPatterns:
    """A checked allow-list; ``allows`` is true for a tool id some pattern matches."""

    patterns: tuple[str, ...]
    _regex: re.Pattern[str]

    def allows(self, tool_id: str) -> bool:
        """True when ``tool_id`` is a well-formed id matched by a pattern."""
        return tool_ids.is_tool_id(tool_id) and self._regex.match(tool_id) is not None

    def allows_server(self, server: str) -> bool:
        """True when some pattern can match a tool of ``server`` (its resources are then readable)."""
        return any(
            p == "*" or re.fullmatch(_glob(p.partition(":")[0]), server) is not None
            for p in self.patterns
        )

    def filter(self, ids: Iterable[str]) -> list[str]:
        """The ids this allow-list lets through, in their order."""
        return [t for t in ids if self.allows(t)]


def compile_patterns(patterns: Iterable[str]) -> ToolPatterns:
    """Check every pattern (InvalidToolPattern on the first bad one) and compile them into one matcher."""
    checked = tuple(dict.fromkeys(check_pattern(p) for p in patterns))
    if len(checked) > MAX_PATTERNS:
        raise InvalidToolPattern(
            f"{len(checked)} tool patterns; at most {MAX_PATTERNS} (use globs such as 'server:*')",
            field="tool_patterns",
        )
    alternatives = [
        ".*" if p == "*" else f"{_glob(p.partition(':')[0])}:{_glob(p.partition(':')[2])}"
        for p in checked
    ]
    # An empty list allows nothing: a regex that never matches.
    body = "|".join(f"(?:{a})" for a in alternatives) or "(?!)"
    return ToolPatterns(checked, re.compile(f"^(?:{body})$"))


@lru_cache(maxsize=256)
def cached_patterns(patterns: tuple[str, ...]) -> ToolPatterns:
    """``compile_patterns`` memoised: grants are checked on every tool call with few distinct lists."""
    return compile_patterns(patterns)


def allowed_scope(
    requested: Iterable[str] | None, patterns: Iterable[str] | None
) -> tuple[list[str] | None, list[str]]:
    """An execution's explicit tool scope under an allow-list: (kept ids or None for all, refused ids).

    ``requested`` None means every tool (narrowed later by the patterns themselves);
    ``patterns`` None means an unrestricted caller.
    """
    if requested is None:
        return None, []
    wanted = list(dict.fromkeys(requested))
    if patterns is None:
        return wanted, []
    matcher = compile_patterns(patterns)
    kept = matcher.filter(wanted)
    return kept, [t for t in wanted if t not in kept]
