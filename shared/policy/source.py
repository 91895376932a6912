"""A policy file read, parsed and validated by the Cedar engine, with the place of each error.

The engine (``cedarpy``) parses and validates; this module only finds where an error is.
Cedar's parse errors carry no position, so the file is cut at its top-level semicolons
(outside strings, comments and brackets) and each statement is parsed alone: the first that
fails is the one to blame, and its shortest failing prefix of lines names the line. The
engine numbers policies ``policy0``, ``policy1``… in file order, which is how a validation
error's policy is mapped back to its line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import cedarpy
import orjson

from shared.errors import PolicyInvalid
from shared.policy.index import PolicyIndex

SCHEMA_FILE = "schema.cedarschema"
# A permit annotated ``@approval("required")`` pauses the calls it decides until a person
# answers; ``@approvers("<group or key name>, …")`` says who may answer over REST
# (``caller``: the caller too). Any other use of the two is refused at load: a file that
# means an approval must not load and decide without one.
APPROVAL, APPROVERS, APPROVAL_REQUIRED = "approval", "approvers", "required"
CALLER_APPROVES = "caller"


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """What the permits that decided a call ask: a person's answer first, from these
    approvers (empty: any admin of the tenant other than the caller)."""

    policies: tuple[str, ...]
    approvers: tuple[str, ...]


@cache
def schema_text() -> str:
    """The schema that ships with AgentCards (``shared/policy/schema.cedarschema``)."""
    return resources.files("shared.policy").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def schema() -> cedarpy.Schema:
    """The shipped schema, parsed once per process."""
    return cedarpy.Schema.from_str(schema_text())


@dataclass(frozen=True)
class PolicyFile:
    """A policy file that parsed and validated: the engine's handle and each policy's annotations."""

    path: Path
    digest: str  # sha256 of the text: what `policy reload` reports as loaded
    # The subsets of the file that can apply to each (action, resource): what is evaluated.
    index: PolicyIndex
    # The engine's id (``policy0``) → the policy's annotations (``@id``, ``@approval``…).
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)

    def name_of(self, engine_id: str) -> str:
        """What a decision names a policy by: its ``@id`` annotation, else the engine's id."""
        return self.annotations.get(engine_id, {}).get("id", engine_id)

    def approval_of(self, engine_ids: tuple[str, ...] | list[str]) -> ApprovalRule | None:
        """What the deciding permits ``engine_ids`` ask before the call runs (None: nothing;
        one of them asking is enough, and their approvers add up)."""
        asking = [pid for pid in engine_ids if APPROVAL in self.annotations.get(pid, {})]
        if not asking:
            return None
        approvers: list[str] = []
        for pid in asking:
            for name in _approvers(self.annotations[pid]):
                if name not in approvers:
                    approvers.append(name)
        return ApprovalRule(tuple(self.name_of(p) for p in asking), tuple(approvers))

    @property
    def count(self) -> int:
        """How many policies the file holds."""
        return len(self.annotations)


def read_policy_file(path: Path) -> PolicyFile:
    """``path`` parsed and validated against the shipped schema; PolicyInvalid naming the
    file, the line and the engine's reason otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyInvalid(f"policy file {path}: cannot read it ({exc})", file=str(path)) from exc
    if not text.strip():
        # What an editor rewriting the file in place leaves for a moment (truncated, not yet
        # written): never taken for a set that permits nothing. A reload keeps the last good
        # set; a process starting refuses to (fail closed: it serves nothing).
        raise PolicyInvalid(
            f"policy file {path}: it is empty (taken for a file being written); to permit "
            "nothing, write a file holding only a comment, e.g. `// nothing is permitted`",
            file=str(path),
        )
    return parse_policies(text, path=path)


def parse_policies(text: str, *, path: Path) -> PolicyFile:
    """``text`` (the contents of ``path``) parsed and validated; PolicyInvalid otherwise."""
    statements = split_statements(text)
    try:
        as_json = orjson.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        line, reason = _locate_parse_error(text, statements, str(exc))
        raise _invalid(path, line, reason) from exc
    static: dict[str, Any] = as_json.get("staticPolicies") or {}
    if as_json.get("templates"):
        raise _invalid(path, 1, "policy templates are not supported; write static policies")
    starts = [start for start, _ in statements]
    result = cedarpy.validate_policies(text, schema())
    if not result.validation_passed:
        error = result.errors[0]
        index = _policy_index(error.policy_id)
        line = starts[index] if index is not None and index < len(starts) else 1
        raise _invalid(path, line, str(error.error))
    annotations = {pid: dict(policy.get("annotations") or {}) for pid, policy in static.items()}
    for pid, notes in annotations.items():
        problem = _approval_problem(notes, static[pid].get("effect"))
        if problem:
            index = _policy_index(pid)
            line = starts[index] if index is not None and index < len(starts) else 1
            raise _invalid(path, line, problem)
    return PolicyFile(
        path=path,
        digest=hashlib.sha256(text.encode()).hexdigest(),
        index=PolicyIndex(static),
        annotations=annotations,
    )


def _approval_problem(notes: dict[str, str], effect: str | None) -> str | None:
    """Why a policy's approval annotations cannot be honoured (None: they can, or it has none)."""
    if APPROVAL not in notes:
        return (
            f'@{APPROVERS} needs @{APPROVAL}("{APPROVAL_REQUIRED}") on the same policy'
            if (APPROVERS in notes)
            else None
        )
    if notes[APPROVAL] != APPROVAL_REQUIRED:
        return f'@{APPROVAL}("{notes[APPROVAL]}"): the one value is "{APPROVAL_REQUIRED}"'
    if effect != "permit":
        return f"@{APPROVAL} belongs on a permit (a forbid has nothing to approve)"
    if APPROVERS in notes and not _approvers(notes):
        return f'@{APPROVERS}("…") names no one; list groups or key names, comma-separated'
    return None


def _approvers(notes: dict[str, str]) -> list[str]:
    return [name.strip() for name in notes.get(APPROVERS, "").split(",") if name.strip()]


def _invalid(path: Path, line: int, reason: str) -> PolicyInvalid:
    return PolicyInvalid(f"{path}:{line}: {reason}", file=str(path), line=line, reason=reason)


def _policy_index(engine_id: str | None) -> int | None:
    if engine_id and engine_id.startswith("policy") and engine_id[6:].isdigit():
        return int(engine_id[6:])
    return None


def split_statements(text: str) -> list[tuple[int, str]]:
    """The file's statements as (first line with code, text up to and with its ``;``).

    A lexical cut only (strings with escapes, ``//`` comments, bracket depth), to place
    errors; what follows the last semicolon is a statement of its own when it holds code."""
    statements: list[tuple[int, str]] = []
    start, line, depth, i = 0, 1, 0, 0
    first: int | None = None
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            line += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == '"':
            if first is None:
                first = line
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    line += 1
                i += 1
        elif not ch.isspace():
            if first is None:
                first = line
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            elif ch == ";" and depth == 0:
                statements.append((first, text[start : i + 1]))
                start, first = i + 1, None
        i += 1
    if first is not None:
        statements.append((first, text[start:]))
    return statements


def _locate_parse_error(
    text: str, statements: list[tuple[int, str]], reason: str
) -> tuple[int, str]:
    """The line of the first statement that does not parse alone, narrowed to the first of
    its lines after which it fails as it does whole (the engine's own reason kept)."""
    for first, statement in statements:
        try:
            cedarpy.policies_to_json_str(statement)
        except ValueError as exc:
            return _narrow(first, statement, str(exc))
    return max(1, text.count("\n")), reason


def _narrow(first: int, statement: str, reason: str) -> tuple[int, str]:
    lines = statement.split("\n")
    # The statement's own text starts mid-line after the previous `;`: its line 0 is `first`
    # once the blank and comment lines before its code are skipped.
    skip = 0
    while skip < len(lines) and (not lines[skip].strip() or lines[skip].strip().startswith("//")):
        skip += 1
    for k in range(skip + 1, len(lines) + 1):
        try:
            cedarpy.policies_to_json_str("\n".join(lines[:k]))
        except ValueError as exc:
            if str(exc) == reason:
                return first + (k - 1 - skip), reason
    return first, reason
