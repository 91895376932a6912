"""The shipped mcpServers example runs after a plain `pip install -e .` (no test extra)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import tomllib
from pathlib import Path

from services.toolhost.servers import StdioServer, load_servers

REPO = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
OWN_PACKAGES = {"shared", "services", "workers", "deploy"}


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def test_every_example_command_resolves_with_runtime_dependencies_only() -> None:
    runtime = {_name(r) for r in PROJECT["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    servers = load_servers(REPO / "deploy" / "examples" / "mcp_servers.json")
    assert servers
    for name, server in servers.items():
        assert isinstance(server, StdioServer), name
        assert shutil.which(server.command), f"{name}: {server.command!r} is not on PATH"
        if server.args[:1] != ["-m"]:
            continue
        module = server.args[1]
        assert importlib.util.find_spec(module), f"{name}: module {module} is not installed"
        top = module.split(".")[0]
        if top in OWN_PACKAGES:
            continue
        dists = {_name(d) for d in providers.get(top, [])}
        assert dists & runtime, (
            f"{name}: {module} comes from {sorted(dists)}, which `pip install -e .` does not "
            "install: add it to [project].dependencies or change the example"
        )
