"""Capabilities rendered as Agent Skills: valid unique names, front matter that any YAML parser
reads back as written, complete file lists with digests, and which versions are published."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
import yaml

from shared.capabilities.skills import (
    published,
    render,
    skill_names,
    skills_of,
    split_uri,
)
from shared.errors import ValidationFailed

# Agent Skills' name rule, written out independently of the module's.
AGENT_SKILLS_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


def item(name: str = "read_file", **fields: Any) -> dict[str, Any]:
    return {
        "id": f"id-{name}",
        "name": name,
        "description": "Read a file. Uses fs:read.",
        "intent": "read a file",
        "code": "return await mcp.fs.read(path=args['path'])",
        "tools_used": ["fs:read"],
        "parameters_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        "success_rate": 0.75,
        "usage_count": 4,
        "version": 1,
        "language": "python",
        "disabled": False,
        **fields,
    }


def frontmatter_of(text: str) -> Any:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_names_are_valid_agent_skills_names_and_unique() -> None:
    capability_names = ["read_file", "read__file", "_private", "x" * 64, "a_" * 32, "yes", "null"]
    names = skill_names(capability_names)
    assert names["read_file"] != names["read__file"]
    assert len(set(names.values())) == len(capability_names)
    assert all(AGENT_SKILLS_NAME.match(n) for n in names.values()), names
    assert names["_private"] == "private" and names["yes"] == "yes"


@pytest.mark.parametrize(
    "description",
    ["yes", "null", "1.0", "key: value # not a comment", 'quotes " and \\ backslash', "é ü 中文",
     "- a list?", "[not, a, list]", "line\nbreak", "@at `tick` *star* &anchor !tag %pct"],
)  # fmt: skip
def test_front_matter_reads_back_as_written(description: str) -> None:
    skill = render(item(description=description), name="read-file")
    text = skill.files[0].content.decode()
    parsed = frontmatter_of(text)
    assert parsed == skill.frontmatter
    assert parsed["name"] == "read-file"
    # One line: a description with a line break is joined (Agent Skills shows it in lists).
    assert parsed["description"] == " ".join(description.split())
    assert all(isinstance(v, str) for v in parsed["metadata"].values())


def test_a_skill_has_its_instructions_code_and_parameters_with_digests() -> None:
    skill = render(item(), name="read-file")
    entry = skill.entry()
    assert entry["uri"] == "skill://read-file/SKILL.md"
    by_uri = {r["uri"]: r for r in entry["resources"]}
    assert entry["resources"][0]["uri"] == entry["uri"]
    for file in skill.files:
        listed = by_uri[f"skill://read-file/{file.path}"]
        assert listed["size"] == len(file.content)
        assert listed["digest"] == "sha256:" + hashlib.sha256(file.content).hexdigest()
    assert skill.file("scripts/capability.py") is not None
    schema = skill.file("references/parameters.json")
    assert schema is not None and json.loads(schema.content)["required"] == ["path"]
    text = skill.files[0].content.decode()
    call = json.loads(text.split("```json\n")[1].split("```")[0])
    assert call == {"capability_id": "read_file", "args": {"path": "…"}}
    assert "`fs:read`" in text and "75% of 4 runs" in text
    meta = frontmatter_of(text)["metadata"]
    assert meta["agentcards-tools"] == "fs:read" and meta["agentcards-success-rate"] == "0.75"


def test_a_skill_says_which_tools_need_approval_only_when_some_do() -> None:
    needs = render(item(approval_tools=["fs:write", "pay:send"]), name="read-file")
    text = needs.files[0].content.decode()
    assert frontmatter_of(text)["metadata"]["agentcards-approval-tools"] == "fs:write pay:send"
    assert "## Needs approval" in text and "- `pay:send`" in text
    plain = render(item(), name="read-file").files[0].content.decode()
    assert frontmatter_of(plain)["metadata"]["agentcards-approval-tools"] == ""
    assert "Needs approval" not in plain


def test_typescript_code_is_a_ts_file() -> None:
    skill = render(item(language="typescript", code="return 1"), name="read-file")
    assert [f.path for f in skill.files][2] == "scripts/capability.ts"


def test_directories_list_their_direct_children() -> None:
    skill = render(item(), name="read-file")
    assert skill.children("") == [
        ("SKILL.md", "text/markdown"),
        ("references", "inode/directory"),
        ("scripts", "inode/directory"),
    ]
    assert skill.children("scripts") == [("scripts/capability.py", "text/x-python")]
    assert skill.children("SKILL.md") is None and skill.children("nope") is None


def test_each_names_latest_version_is_published_unless_disabled() -> None:
    items = [
        item("a", version=1),
        item("a", version=2, code="return 2"),
        item("b", version=1),
        item("b", version=2, disabled=True),  # `b` runs version 2, which is refused
        item("c", version=1, disabled=True),
    ]
    kept = published(items)
    assert [(i["name"], i["version"]) for i in kept] == [("a", 2)]
    [skill] = skills_of(kept)
    code = skill.file("scripts/capability.py")
    assert code is not None and code.content == b"return 2\n"


def test_uris_split_into_skill_and_path_and_others_are_refused() -> None:
    assert split_uri("skill://read-file/SKILL.md") == ("read-file", "SKILL.md")
    assert split_uri("skill://read-file") == ("read-file", "")
    assert split_uri("skill://read-file/scripts") == ("read-file", "scripts")
    with pytest.raises(ValidationFailed):
        split_uri("file:///etc/passwd")
    with pytest.raises(ValidationFailed):
        render(item(), name="Not_Valid")
