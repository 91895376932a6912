"""Servers behind the gateway that act for people. ``"auth": {"type": "token-exchange"}``:
each person's calls reach it with a token exchanged for theirs at the gateway's identity
provider (npm `oidc-provider` with an RFC 8693 grant). ``"auth": {"type": "oauth"}``: a
server with an authorization server of its own (a second `oidc-provider`), which each person
connects once through a link. Never the person's own token, never anyone else's; a key's
calls are refused ``authorization_required``; no token is kept in plain text.

Its own stack: the gateway's settings name its own identity provider and public URL (fixed
ports), and the upstream servers' URLs are fixed before the stack starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pgserver  # type: ignore[import-untyped]
import psycopg
import pytest
import redis
from mcp import types

from shared.queues import CONNECT_FLOW_PREFIX
from tests.harness import spawn, stop_group, wait_until
from tests.integration.identity.provider import (
    IdentityProvider,
    free_port,
    gateway_options,
    redirect_params,
    redis_value,
    running_provider,
)
from tests.stack import REPO, E2EStack, mcp_session, stack_fixture, tool_error

IDP_PORT, GATEWAY_PORT, UPSTREAM_PORT = free_port(), free_port(), free_port()
OWN_IDP_PORT, TICKETS_PORT = free_port(), free_port()  # the OAuth server and its own issuer
ISSUER = f"http://127.0.0.1:{IDP_PORT}"
PUBLIC_URL = f"http://127.0.0.1:{GATEWAY_PORT}"
AUDIENCE = f"http://127.0.0.1:{UPSTREAM_PORT}/mcp"
UPSTREAM = {"url": AUDIENCE,
            "auth": {"type": "token-exchange", "audience": AUDIENCE, "scopes": ["upstream:read"]}}  # fmt: skip
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "groups": {
        "engineers": {
            "tools": ["upstream:*", "tickets:*"],
            "scopes": ["agentcards:read", "agentcards:execute"],
        },
    },
}
OWN_ISSUER = f"http://127.0.0.1:{OWN_IDP_PORT}"
TICKETS = f"http://127.0.0.1:{TICKETS_PORT}/mcp"
OUT = Path(tempfile.gettempdir()) / "agentcards-upstream-identity"  # the two-people table
WHOAMI = """
try:
    return await mcp.upstream.whoami()
except ToolCallError as e:
    return {"error": e.type, "message": str(e), "url": e.url}
"""

stack = stack_fixture(
    lambda tmp: {"upstream": UPSTREAM, "tickets": {"url": TICKETS, "auth": {"type": "oauth"}}},
    learning=False,
    synced_servers=1,  # tickets lists its tools once a person connected it
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT),
)


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """Started before the stack: the toolhost reads the server's tools with the gateway's
    client at once."""
    tmp = tmp_path_factory.mktemp("upstream-idp")
    with running_provider(tmp, port=IDP_PORT, resource=f"{PUBLIC_URL}/mcp") as provider:
        yield provider


@contextlib.contextmanager
def upstream_server(tmp: Path, port: int, issuer: str, audience: str) -> Iterator[Path]:
    """tests/integration/identity/upstream_server.py, running; yields the file listing every
    token it was shown."""
    log = tmp / "seen.jsonl"
    log.touch()
    argv = [sys.executable, "-m", "tests.integration.identity.upstream_server",
            str(port), issuer, audience, str(log)]  # fmt: skip
    proc = spawn(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers() -> bool:
        try:
            return httpx.get(audience, timeout=2).status_code == 401
        except httpx.TransportError:
            return proc.poll() is not None

    try:
        wait_until(answers, what="the upstream server", timeout_s=30)
        assert proc.poll() is None, "tests.integration.identity.upstream_server exited"
        yield log
    finally:
        stop_group(proc)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, idp: IdentityProvider) -> Iterator[Path]:
    """The token-exchange server, running (before the stack)."""
    with upstream_server(
        tmp_path_factory.mktemp("upstream"), UPSTREAM_PORT, ISSUER, AUDIENCE
    ) as log:
        yield log


@pytest.fixture(scope="module")
def own_idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """The OAuth server's own authorization server (its resource: nobody's gateway)."""
    tmp = tmp_path_factory.mktemp("own-idp")
    with running_provider(tmp, port=OWN_IDP_PORT, resource="http://127.0.0.1:9/none") as provider:
        yield provider


@pytest.fixture(scope="module")
def tickets(tmp_path_factory: pytest.TempPathFactory, own_idp: IdentityProvider) -> Iterator[Path]:
    """The OAuth server, running (before the stack)."""
    with upstream_server(
        tmp_path_factory.mktemp("tickets"), TICKETS_PORT, OWN_ISSUER, TICKETS
    ) as log:
        yield log


def run(client: httpx.Client, headers: dict[str, str], code: str) -> Any:
    ran = client.post("/v1/executions", params={"wait": "true"}, headers=headers,
                      json={"code": code, "timeout_s": 60})  # fmt: skip
    assert ran.status_code in {200, 201}, ran.text
    body = ran.json()
    assert body["status"] == "succeeded", body
    return body["result"]


def test_each_person_reaches_the_server_as_themselves(
    idp: IdentityProvider, seen: Path, own_idp: IdentityProvider, tickets: Path, stack: E2EStack
) -> None:
    """Two people of one tenant: each call arrives with a token exchanged for theirs (their
    subject, the server's audience, the gateway as actor), once per person while it lasts;
    a key is refused `authorization_required`; the people's own tokens never reach the
    server; no token is in Redis, a pg_dump or a log in plain text."""
    people = {user: idp.token(user) for user in ("alice", "erin")}
    with httpx.Client(base_url=stack.gateway_url, timeout=120) as client:
        wait_until(
            lambda: any(t["id"] == "upstream:whoami" for t in client.get(
                "/v1/tools", headers={"Authorization": f"Bearer {people['alice']}"}
            ).json().get("tools", [])),
            what="the upstream server's tools, listed with the gateway client's own token",
            timeout_s=90,
        )  # fmt: skip
        table = []
        for user in ("alice", "erin", "alice", "erin"):
            answer = run(client, {"Authorization": f"Bearer {people[user]}"}, WHOAMI)
            assert answer["sub"] == user, answer
            assert answer["aud"] == AUDIENCE and answer["act"] == {"sub": "gateway"}, answer
            table.append(f"| {user} | {answer['sub']} | {answer['aud']} | {answer['act']} |")
        keyed = stack.as_new_tenant("acme")
        refused = run(client, keyed.headers, WHOAMI)
    assert refused["error"] == "authorization_required", refused
    assert "an API key names no person" in refused["message"]
    exchanges = [line for line in _idp_log(idp).splitlines() if line.startswith("exchanged")]
    assert sorted(exchanges) == [f"exchanged alice for {AUDIENCE}",
                                 f"exchanged erin for {AUDIENCE}"], exchanges  # fmt: skip
    shown = [json.loads(line) for line in seen.read_text().splitlines()]
    assert all(s["taken"] and s["aud"] == AUDIENCE for s in shown), shown
    assert {s["sub"] for s in shown} == {"alice", "erin", "gateway"}  # gateway: the tool list
    assert not {s["token"] for s in shown} & set(people.values())
    OUT.mkdir(exist_ok=True)
    (OUT / "two-people.md").write_text(
        "| caller | upstream saw sub | audience | actor |\n| --- | --- | --- | --- |\n"
        + "\n".join(table)
        + f"\n| API key | (refused: {refused['error']}) | | |\n"
    )
    _no_plaintext(stack, {s["token"] for s in shown} | set(people.values()))


def _no_plaintext(stack: E2EStack, tokens: set[str]) -> None:
    """None of ``tokens`` is in Redis (any key or value), a pg_dump, or a process's log."""
    time.sleep(1)  # the runs' last rows are written just after their answers
    needles = [t[-40:].encode() for t in tokens]
    client_redis = redis.Redis.from_url(stack.settings.redis_url or "")
    for name in client_redis.scan_iter(count=1000):
        held = redis_value(client_redis, name)
        assert not any(n in name or n in held for n in needles), name
    dump = subprocess.run(
        [str(Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"),
         "--data-only", stack.settings.database_url or ""],
        capture_output=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert b"COPY public.executions" in dump and not any(n in dump for n in needles)
    for proc in stack.procs.values():
        text = proc.log_path.read_text(errors="replace").encode()
        assert not any(n in text for n in needles), proc.log_path


def _idp_log(idp: IdentityProvider) -> str:
    return idp.log_path.read_text(errors="replace") if idp.log_path else ""


WHOAMI_TICKETS = WHOAMI.replace("mcp.upstream", "mcp.tickets")
WRITE_TICKET = WHOAMI.replace("mcp.upstream.whoami()", "mcp.tickets.write_ticket(title='printer')")


def test_people_connect_a_server_of_its_own_once(
    idp: IdentityProvider, seen: Path, own_idp: IdentityProvider, tickets: Path, stack: E2EStack
) -> None:
    """Alice connects `tickets` through a link (its own authorization server: discovery from
    the 401, dynamic registration, PKCE); Erin, not connected, gets `authorization_required`
    with a link of her own, connects, and each is seen as themselves; bad callbacks store
    nothing; the access token is refreshed; a tool needing more scope asks for it (step up);
    a refused refresh, a deleted connection and a token refused mid-session ask again; with
    the authorization server down a renewal fails clearly, storing nothing, while a
    connection still valid keeps working."""
    alice = {"Authorization": f"Bearer {idp.token('alice')}"}
    erin = {"Authorization": f"Bearer {idp.token('erin')}"}
    transcript: list[str] = []
    with httpx.Client(base_url=stack.gateway_url, timeout=120) as client:
        servers = {s["name"]: s for s in client.get("/v1/servers", headers=alice).json()["servers"]}
        assert servers["tickets"]["state"] == "needs_user_authorization", servers["tickets"]
        # Nobody connected yet, its tools unknown: a call is asked to connect, from code and
        # directly; a server that does not exist stays unknown.
        early = run(client, erin, WHOAMI_TICKETS)
        assert early["error"] == "authorization_required", early
        assert early["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), early
        direct = tool_error(asyncio.run(_direct_whoami(stack, erin)))
        assert direct["type"] == "authorization_required", direct
        assert f"{PUBLIC_URL}/oauth/connect/" in json.dumps(direct), direct
        assert run(client, erin, WHOAMI.replace("mcp.upstream", "mcp.nosuch"))["error"] == (
            "unknown_tool"
        )
        assert client.get("/v1/connections", headers=alice).json() == {"connections": []}
        link = client.post("/v1/connections/tickets", headers=alice).json()["url"]
        assert link.startswith(f"{PUBLIC_URL}/oauth/connect/")
        transcript.append(f"POST /v1/connections/tickets (alice) -> {link}")
        callback = _authorize(client, link, own_idp, "alice", transcript)
        assert client.get(link.removeprefix(PUBLIC_URL)).status_code == 410  # used once
        forged = client.get("/oauth/callback", params={**callback, "state": "forged"})
        assert forged.status_code == 400 and "names no connection" in forged.text
        assert client.get("/v1/connections", headers=alice).json() == {"connections": []}
        done = client.get("/oauth/callback", params=callback)
        transcript.append(f"GET /oauth/callback?code=…&state=… -> {done.status_code}")
        assert done.status_code == 200 and "Connected to tickets" in done.text, done.text
        replayed = client.get("/oauth/callback", params=callback)
        assert replayed.status_code == 400, replayed.text
        listed = client.get("/v1/connections", headers=alice).json()["connections"]
        assert [c["server"] for c in listed] == ["tickets"]
        wait_until(
            lambda: any(t["id"] == "tickets:whoami" for t in client.get(
                "/v1/tools", headers=alice).json()["tools"]),
            what="tickets' tools, listed by a connected person's session", timeout_s=60,
        )  # fmt: skip
        assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"
        asked = run(client, erin, WHOAMI_TICKETS)
        assert asked["error"] == "authorization_required", asked
        assert asked["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), asked
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        # Two flows at once: a code redeemed with the other flow's state (its PKCE verifier)
        # is refused, and the code is then used up.
        first = _authorize(client, asked["url"], own_idp, "erin", [])
        second = _authorize(client, client.post("/v1/connections/tickets", headers=erin)
                            .json()["url"], own_idp, "erin", [])  # fmt: skip
        crossed = client.get("/oauth/callback", params={**first, "state": second["state"]})
        assert crossed.status_code == 400 and "refused the code" in crossed.text, crossed.text
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        assert client.get("/oauth/callback", params=first).status_code == 200
        assert run(client, erin, WHOAMI_TICKETS)["sub"] == "erin"
        _expire(stack, "alice")  # as if her access token had run out: her call renews it
        assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"
        # Step up: write_ticket needs upstream:write, which her connection does not grant.
        stepped = run(client, alice, WRITE_TICKET)
        assert stepped["error"] == "authorization_required", stepped
        assert "scope upstream:write" in stepped["message"], stepped
        assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"  # kept meanwhile
        wider = _authorize(client, stepped["url"], own_idp, "alice", transcript, "step up")
        assert client.get("/oauth/callback", params=wider).status_code == 200
        filed = run(client, alice, WRITE_TICKET)
        assert filed["by"] == "alice" and "upstream:write" in filed["scope"].split(), filed
        assert "upstream:read" in filed["scope"].split(), filed  # the union, not the new one
        # A refused refresh (her grants revoked at the provider): asked to connect again.
        own_idp.admin("revoke", account="erin")
        _expire(stack, "erin")
        expired = run(client, erin, WHOAMI_TICKETS)
        assert expired["error"] == "authorization_required", expired
        assert "has expired or was revoked" in expired["message"], expired
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        back = _authorize(client, expired["url"], own_idp, "erin", [])
        assert client.get("/oauth/callback", params=back).status_code == 200
        assert run(client, erin, WHOAMI_TICKETS)["sub"] == "erin"
        # Its authorization server down: a renewal fails naming it, nothing stored or
        # deleted; a connection still valid keeps working; connecting fails clearly.
        _expire(stack, "erin")
        kept = client.get("/v1/connections", headers=erin).json()
        own_idp.admin("down")
        try:
            down = run(client, erin, WHOAMI_TICKETS)
            assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"
            link = client.post("/v1/connections/tickets", headers=alice).json()["url"]
            page = client.get(link.removeprefix(PUBLIC_URL))
        finally:
            own_idp.admin("up")
        assert down["error"] == "server_unavailable", down
        assert "'tickets'" in down["message"] and OWN_ISSUER in down["message"], down
        assert "503" in down["message"] and "is kept" in down["message"], down
        assert client.get("/v1/connections", headers=erin).json() == kept
        assert page.status_code == 502 and OWN_ISSUER in page.text, page.text
        assert "503" in page.text and "Nothing was stored" in page.text, page.text
        assert not list(redis.Redis.from_url(stack.settings.redis_url or "").scan_iter(
            CONNECT_FLOW_PREFIX + "*"))  # fmt: skip
        assert run(client, erin, WHOAMI_TICKETS)["sub"] == "erin"  # renewed, now it is up
        assert client.delete("/v1/connections/tickets", headers=alice).status_code == 204
        assert "a client revoked a grant of alice" in _idp_log(own_idp)  # at its provider too
        again = run(client, alice, WHOAMI_TICKETS)
        assert again["error"] == "authorization_required" and again["url"], again
        keyed = stack.as_new_tenant("acme")
        assert run(client, keyed.headers, WHOAMI_TICKETS)["error"] == "authorization_required"
        # Erin's grant revoked at the provider: the server refuses her token mid-session (401).
        tickets.with_name(tickets.name + ".revoked").write_text("erin\n")
        revoked = run(client, erin, WHOAMI_TICKETS)
        assert revoked["error"] == "authorization_required", revoked
        assert revoked["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), revoked
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
    shown = [json.loads(line) for line in tickets.read_text().splitlines()]
    assert all(s["taken"] != s["revoked"] and s["aud"] == TICKETS for s in shown), shown
    assert {s["sub"] for s in shown if s["revoked"]} == {"erin"}
    alices = {s["token"] for s in shown if s["sub"] == "alice"}
    toolhost = stack.procs["toolhost"].log_path.read_text(errors="replace")
    # Connected, renewed, stepped up: three tokens.
    assert len(alices) == 3, "\n".join(x for x in toolhost.splitlines() if "tickets" in x)
    assert {s["sub"] for s in shown} == {"alice", "erin"}
    OUT.mkdir(exist_ok=True)
    (OUT / "connect-transcript.txt").write_text("\n".join(transcript) + "\n")
    (OUT / "expired.txt").write_text(json.dumps(expired, indent=2) + "\n")
    (OUT / "step-up.txt").write_text(json.dumps(stepped, indent=2) + "\n")
    (OUT / "authorization-server-down.txt").write_text(
        json.dumps(down, indent=2) + f"\nconnect page: {page.status_code} {page.text}\n"
    )
    _no_plaintext(stack, {s["token"] for s in shown})


async def _direct_whoami(stack: E2EStack, headers: dict[str, str]) -> types.CallToolResult:
    """``whoami`` called directly on ``tickets``' own endpoint with the MCP SDK's client."""
    async with mcp_session(stack, path="/mcp/servers/tickets", headers=headers) as session:
        return await session.call_tool("whoami", {})


def _expire(stack: E2EStack, user: str) -> None:
    """As if the person's stored access token for ``tickets`` had run out (the provider's
    tokens last ten minutes): their next call renews it first."""
    with psycopg.connect(stack.settings.database_url or "", autocommit=True) as conn:
        conn.execute("UPDATE upstream_connections SET expires_at = now() - interval '1 second' "
                     "WHERE user_id = %s AND server = 'tickets'", (user,))  # fmt: skip


def _authorize(
    client: httpx.Client, link: str, own: IdentityProvider, user: str, transcript: list[str],
    what: str = "connect",
) -> dict[str, str]:  # fmt: skip
    """Open a connect link as a browser would and sign in at the server's own authorization
    server as ``user``: the query the callback gets (code, state, iss)."""
    opened = client.get(link.removeprefix(PUBLIC_URL))
    assert opened.status_code == 303, opened.text
    authorize = opened.headers["location"]
    asked = redirect_params(authorize)
    assert authorize.startswith(OWN_ISSUER) and asked["code_challenge_method"] == "S256"
    assert asked["resource"] == TICKETS and asked["redirect_uri"] == f"{PUBLIC_URL}/oauth/callback"
    transcript.append(f"{what}: GET {link.split('/oauth')[0]}/oauth/connect/… -> 303 {authorize.split('?')[0]}"
                      f" (client {asked['client_id']}, registered; scope={asked['scope']}, "
                      f"resource={asked['resource']}, PKCE S256)")  # fmt: skip
    back = own.sign_in(authorize, user)
    assert back.startswith(f"{PUBLIC_URL}/oauth/callback"), back
    transcript.append(f"BROWSER login + consent as {user} at {OWN_ISSUER} -> redirect to "
                      "/oauth/callback with code, state, iss")  # fmt: skip
    return redirect_params(back)
