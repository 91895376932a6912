"""Published server.json documents turned into the mcpServers entries the toolhost runs."""

from __future__ import annotations

import pytest

from deploy.registry.server_json import Values, choose, parse_server_json, resolve
from services.toolhost.servers import parse_servers
from shared.errors import ValidationFailed
from tests.registry_server import (
    NPM_BUSINESS_HOTELS,
    NPM_GITHUB,
    OCI_ARIFOS,
    PYPI_EXCEL_LSP,
    REMOTE_EXA,
)


def values(**given: dict[str, str]) -> Values:
    return Values(
        env=given.get("env", {}),
        headers=given.get("headers", {}),
        args=given.get("args", {}),
        ask=None,
    )


@pytest.mark.parametrize(
    ("doc", "prefer", "expected", "kind"),
    [
        (PYPI_EXCEL_LSP, None, {"command": "uvx", "args": ["excel-lsp==0.1.0", "serve"]}, "pypi"),
        (
            NPM_BUSINESS_HOTELS,
            None,
            {"command": "npx", "args": ["-y", "business-hotels-mcp@2.0.2"]},
            "npm",
        ),
        (
            OCI_ARIFOS,
            "oci",
            {
                "command": "docker",
                "args": ["run", "-i", "--rm", "docker.io/ariffazil/arifos:64.2.0"],
            },
            "oci",
        ),
        (OCI_ARIFOS, "pypi", {"command": "uvx", "args": ["arifos==64.2.0"]}, "pypi"),
        (
            REMOTE_EXA,
            None,
            {"type": "http", "url": "https://mcp.exa.ai/mcp", "headers": {}},
            "remote",
        ),
    ],
)
def test_each_published_kind_becomes_an_entry_the_toolhost_accepts(
    doc: dict, prefer: str | None, expected: dict, kind: str
) -> None:
    server = parse_server_json(doc, source="test")
    resolved = resolve(server, choose(server, prefer), values())
    assert resolved.entry == expected and resolved.kind == kind
    parse_servers({"mcpServers": {"s": resolved.entry}})  # the toolhost's own validation


def test_a_secret_input_is_required_given_and_marked_for_sealing() -> None:
    server = parse_server_json(NPM_GITHUB, source="test")
    way = choose(server, None)
    with pytest.raises(ValidationFailed, match=r"GITHUB_PERSONAL_ACCESS_TOKEN is required .*--env"):
        resolve(server, way, values())
    given = resolve(server, way, values(env={"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}))
    assert given.entry["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}
    assert given.secret_env == ["GITHUB_PERSONAL_ACCESS_TOKEN"]
    asked = Values(env={}, headers={}, args={}, ask=lambda what, desc, secret: f"{what}|{secret}")
    assert resolve(server, way, asked).entry["env"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "environment variable GITHUB_PERSONAL_ACCESS_TOKEN|True"
    }


def test_a_docker_variable_reaches_the_container_by_name() -> None:
    doc = {
        **OCI_ARIFOS,
        "packages": [
            {
                **OCI_ARIFOS["packages"][0],
                "environmentVariables": [
                    {"name": "ARIF_KEY", "isRequired": True, "isSecret": True}
                ],
            }
        ],
    }
    server = parse_server_json(doc, source="test")
    entry = resolve(server, choose(server, None), values(env={"ARIF_KEY": "k"})).entry
    assert entry["args"][:5] == ["run", "-i", "--rm", "-e", "ARIF_KEY"]
    assert entry["env"] == {"ARIF_KEY": "k"}


def test_bad_documents_and_packages_we_cannot_run_are_named() -> None:
    with pytest.raises(ValidationFailed, match="name: String should match pattern"):
        parse_server_json({**PYPI_EXCEL_LSP, "name": "no-slash"}, source="x.json")
    with pytest.raises(ValidationFailed, match="version"):
        parse_server_json({"name": "io.github.a/b", "description": "d"}, source="x.json")
    nuget = parse_server_json(
        {
            "name": "io.github.joelverhagen/knapcode-samplemcpserver",
            "description": "Sample NuGet MCP server",
            "version": "0.5.0",
            "packages": [
                {"registryType": "nuget", "identifier": "Knapcode.SampleMcpServer",
                 "version": "0.5.0", "transport": {"type": "stdio"}}
            ],
        },
        source="x.json",
    )  # fmt: skip
    with pytest.raises(ValidationFailed, match=r"nothing this gateway can run: nuget \(stdio\)"):
        choose(nuget, None)
    with pytest.raises(ValidationFailed, match="as remote"):
        choose(parse_server_json(PYPI_EXCEL_LSP, source="x"), "remote")
