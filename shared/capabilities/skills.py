"""A tenant's capabilities as Agent Skills: the files of each skill, its name and its entry.

One rendering serves two readers: the gateway's MCP server publishes the skills under
``skill://<name>/...`` (the MCP skills extension, SEP-2640) and ``agentcards capabilities
export --skills DIR`` writes the same bytes as folders (the Agent Skills format, which the
extension delegates to). So a file's digest on ``/mcp`` is the digest of the exported file.

A skill is three files: ``SKILL.md`` (front matter ``name``, ``description``,
``compatibility`` and ``metadata``; a body that says how to run it through the gateway's
``execute_capability`` tool), the code under ``scripts/`` and the inferred parameters'
JSON Schema under ``references/``. Nothing in them changes unless the capability does
(no timestamps): the stats that do change (success rate, runs) are the capability's own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.errors import ValidationFailed

EXTENSION_ID = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
SKILL_FILE = "SKILL.md"
PARAMETERS_FILE = "references/parameters.json"
DIRECTORY_MIME = "inode/directory"
# Agent Skills: 1-64 lowercase letters, digits and hyphens, no leading, trailing or double hyphen.
NAME_RE = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
MAX_NAME_LEN = 64
MAX_DESCRIPTION_LEN = 1024  # Agent Skills' limit on `description`
_CODE_FILES = {"python": ("scripts/capability.py", "text/x-python"),
               "typescript": ("scripts/capability.ts", "text/x-typescript")}  # fmt: skip
_MIME = {SKILL_FILE: "text/markdown", PARAMETERS_FILE: "application/json"}
_EXAMPLES: dict[str, Any] = {"string": "…", "integer": 0, "number": 0, "boolean": False,
                             "array": [], "object": {}}  # fmt: skip
COMPATIBILITY = (
    "Runs on the AgentCards gateway that serves it: call its MCP tool execute_capability "
    "(the code calls MCP tools through the gateway's sandbox; it does not run standalone)."
)


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill: its path in the skill folder, MIME type and bytes."""

    path: str
    mime_type: str
    content: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()


@dataclass(frozen=True)
class Skill:
    """A capability as a skill: its name (the folder's), front matter and files (SKILL.md first)."""

    name: str
    capability: str
    tools: tuple[str, ...]
    frontmatter: dict[str, Any]
    files: tuple[SkillFile, ...]

    @property
    def uri(self) -> str:
        """The URI of its ``SKILL.md``, which names the skill on the wire."""
        return file_uri(self.name, SKILL_FILE)

    def file(self, path: str) -> SkillFile | None:
        return next((f for f in self.files if f.path == path), None)

    def entry(self) -> dict[str, Any]:
        """The extension's ``Skill`` entry: uri, verbatim front matter, every file's digest and size."""
        return {
            "uri": self.uri,
            "frontmatter": self.frontmatter,
            "resources": [
                {"uri": file_uri(self.name, f.path), "digest": f.digest, "size": len(f.content)}
                for f in self.files
            ],
        }

    def children(self, directory: str) -> list[tuple[str, str]] | None:
        """(path, MIME type) of the direct children of ``directory`` ("" is the skill's root;
        a subdirectory is ``inode/directory``), or None when it is not one of its directories."""
        prefix = f"{directory}/" if directory else ""
        if directory and not any(f.path.startswith(prefix) for f in self.files):
            return None
        found: dict[str, str] = {}
        for f in self.files:
            if not f.path.startswith(prefix):
                continue
            head, sep, _ = f.path[len(prefix) :].partition("/")
            found.setdefault(prefix + head, DIRECTORY_MIME if sep else f.mime_type)
        return sorted(found.items())


def file_uri(skill: str, path: str) -> str:
    return f"{SCHEME}{skill}/{path}"


def split_uri(uri: str) -> tuple[str, str]:
    """``skill://<name>[/<path>]`` -> (name, path; "" for the skill's root directory)."""
    if not uri.startswith(SCHEME):
        raise ValidationFailed(f"{uri[:200]!r} is not a skill:// URI", field="uri")
    name, _, path = uri.removeprefix(SCHEME).partition("/")
    return name, path


def skill_names(capability_names: Iterable[str]) -> dict[str, str]:
    """Capability name -> skill name, unique within the set and valid Agent Skills names.

    Capability names are snake_case (``shared/capabilities/naming.py``), so ``_`` becomes
    ``-``; a name that two capabilities would share (``a_b`` and ``a__b``) keeps it for the
    first in name order and the others end with 8 hex digits of their capability name's hash.
    """
    names: dict[str, str] = {}
    taken: set[str] = set()
    for capability in sorted(set(capability_names)):
        base = _slug(capability)
        name = base
        if name in taken:
            suffix = "-" + hashlib.sha256(capability.encode()).hexdigest()[:8]
            name = base[: MAX_NAME_LEN - len(suffix)].rstrip("-") + suffix
        taken.add(name)
        names[capability] = name
    return names


def _slug(capability: str) -> str:
    words = [w for w in re.split(r"[^a-z0-9]+", capability.lower()) if w]
    name = "-".join(words)[:MAX_NAME_LEN].rstrip("-") or "capability"
    return name


def published(items: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The items that are skills: each name's latest version, unless it is disabled (running
    a capability by name runs its latest version, and a disabled one is refused)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for item in items:
        if item["name"] not in latest or item["version"] > latest[item["name"]]["version"]:
            latest[item["name"]] = item
    return [item for item in latest.values() if not item.get("disabled")]


def skills_of(items: Sequence[Mapping[str, Any]]) -> list[Skill]:
    """The skills of capability items (``shared/capabilities/listing.ITEM_FIELDS``, as ``published``
    keeps them), by skill name."""
    names = skill_names(item["name"] for item in items)
    return sorted((render(item, name=names[item["name"]]) for item in items), key=lambda s: s.name)


def render(item: Mapping[str, Any], *, name: str) -> Skill:
    """One capability item as the skill called ``name``."""
    if not NAME_RE.match(name):
        raise ValidationFailed(f"{name!r} is not a valid skill name", field="name")
    language = item.get("language") or "python"
    code_path, code_mime = _CODE_FILES.get(language, _CODE_FILES["python"])
    schema = item.get("parameters_schema") or {"type": "object", "properties": {}}
    description = _description(item)
    tools = list(dict.fromkeys(item.get("tools_used") or []))
    approvals = list(dict.fromkeys(item.get("approval_tools") or []))
    metadata = {
        "agentcards-capability": str(item["name"]),
        "agentcards-capability-id": str(item["id"]),
        "agentcards-version": str(item.get("version", 1)),
        "agentcards-language": language,
        "agentcards-tools": " ".join(tools),
        "agentcards-approval-tools": " ".join(approvals),
        "agentcards-success-rate": f"{float(item.get('success_rate') or 0.0):.4g}",
        "agentcards-usage-count": str(int(item.get("usage_count") or 0)),
    }
    frontmatter: dict[str, Any] = {
        "name": name,
        "description": description,
        "compatibility": COMPATIBILITY,
        "metadata": metadata,
    }
    skill_md = _frontmatter_text(frontmatter) + _body(
        item, schema, tools, approvals, code_path, language
    )
    files = (
        SkillFile(SKILL_FILE, _MIME[SKILL_FILE], skill_md.encode()),
        SkillFile(PARAMETERS_FILE, _MIME[PARAMETERS_FILE], _json(schema).encode()),
        SkillFile(code_path, code_mime, _with_newline(str(item["code"])).encode()),
    )
    return Skill(
        name=name,
        capability=str(item["name"]),
        tools=tuple(tools),
        frontmatter=frontmatter,
        files=files,
    )


def _description(item: Mapping[str, Any]) -> str:
    """The capability's description (from its intent and tools), else its intent; one line."""
    text = " ".join(str(item.get("description") or item.get("intent") or "").split())
    text = text or f"Learned capability {item['name']}."
    if len(text) > MAX_DESCRIPTION_LEN:
        text = text[: MAX_DESCRIPTION_LEN - 1].rstrip() + "…"
    return text


def _frontmatter_text(frontmatter: Mapping[str, Any]) -> str:
    """YAML front matter whose every string is a JSON string: JSON is YAML, so any YAML
    parser (1.1 or 1.2) reads back exactly these strings, never a number or a boolean."""
    lines = ["---"]
    for key, value in frontmatter.items():
        if isinstance(value, Mapping):
            lines.append(f"{key}:")
            lines += [f"  {k}: {_scalar(v)}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join([*lines, "---", ""])


def _scalar(value: Any) -> str:
    # Even a plain-looking name: `null`, `yes` or `on` would read back as something else.
    return json.dumps(str(value), ensure_ascii=False)


def _body(
    item: Mapping[str, Any],
    schema: Mapping[str, Any],
    tools: list[str],
    approvals: list[str],
    code: str,
    language: str,
) -> str:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    example = {k: _example(v) for k, v in properties.items() if k in required}
    call = {"capability_id": item["name"], "args": example}
    parameters = [
        f"- `{key}` ({spec.get('type', 'any')}{', required' if key in required else ''})"
        + (f": {spec['description']}" if spec.get("description") else "")
        for key, spec in properties.items()
    ] or ["- none"]
    rate = float(item.get("success_rate") or 0.0)
    runs = int(item.get("usage_count") or 0)
    return "\n".join(
        [
            "",
            f"# {item['name']}",
            "",
            _description(item),
            "",
            f"Learned by AgentCards from the intent: {' '.join(str(item.get('intent', '')).split())}",
            "",
            "## How to run it",
            "",
            "Call the MCP tool `execute_capability` on the AgentCards gateway that serves this "
            "skill, with the capability's name and its arguments:",
            "",
            "```json",
            _json(call).rstrip("\n"),
            "```",
            "",
            "The result is the execution: `status`, `result`, `error`, `stdout`, `tool_calls`.",
            "",
            "## Parameters",
            "",
            f"`args` follows the JSON Schema in [{PARAMETERS_FILE}]({PARAMETERS_FILE}):",
            "",
            *parameters,
            "",
            "## Tools it calls",
            "",
            *([f"- `{t}`" for t in tools] or ["- none"]),
            "",
            *_approval_section(approvals),
            "## Code",
            "",
            f"[{code}]({code}) ({language}) is the code the gateway runs in its sandbox, "
            "where `mcp` (the tools) and `args` are defined.",
            "",
            "## Record",
            "",
            f"Succeeded {rate:.0%} of {runs} run{'s' if runs != 1 else ''}.",
            "",
        ]
    )


def _approval_section(approvals: list[str]) -> list[str]:
    """The body's approval section: empty unless a run of it waited for someone's approval."""
    if not approvals:
        return []
    return [
        "## Needs approval",
        "",
        "A policy asks a person to approve its calls of these tools, so a run waits for an "
        "answer (`waiting_approval`) and fails with `approval_denied` or `approval_timeout` "
        "without one:",
        "",
        *[f"- `{t}`" for t in approvals],
        "",
    ]


def _example(spec: Mapping[str, Any]) -> Any:
    if "default" in spec:
        return spec["default"]
    kind = spec.get("type")
    return _EXAMPLES.get(kind) if isinstance(kind, str) else None


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
