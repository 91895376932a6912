"""Servers behind the gateway that act for people. ``"auth": {"type": "token-exchange"}``:
each person's calls reach it with a token exchanged for theirs at the gateway's identity
provider (npm `oidc-provider` with an RFC 8693 grant). ``"auth": {"type": "oauth"}``: a
server with an authorization server of its own (a second `oidc-provider`), which each person
connects once through a link. Never the person's own token, never anyone else's; a key's
calls are refused ``authorization_required``; no token is kept in plain text.

Its own stack: the gateway's settings name its own identity provider and public URL (fixed
ports), and the upstream servers' URLs are fixed before the stack starts. The public URL is
https, a TLS front before the gateway (tls_front.py), as a deployment's proxy makes it: only
so does the gateway offer its client ID metadata document (`notes`' authorization server
fetches it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pgserver  # type: ignore[import-untyped]
import psycopg
import pytest
import redis
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from shared.queues import CONNECT_FLOW_PREFIX, CONNECT_LINK_PREFIX
from tests.harness import remove_at_exit, spawn, stop_group, wait_until
from tests.integration.identity.provider import (
    IdentityProvider,
    free_port,
    gateway_options,
    redirect_params,
    redis_value,
    running_provider,
)
from tests.integration.identity.tls_front import tls_front
from tests.stack import REPO, E2EStack, mcp_session, stack_fixture, tool_error

IDP_PORT, GATEWAY_PORT, UPSTREAM_PORT = free_port(), free_port(), free_port()
OWN_IDP_PORT, TICKETS_PORT = free_port(), free_port()  # the OAuth server and its own issuer
CIMD_IDP_PORT, NOTES_PORT = free_port(), free_port()  # one whose issuer takes CIMDs
FRONT_PORT = free_port()  # https, before the gateway
FRONT = remove_at_exit(Path(tempfile.mkdtemp(prefix="upstream-front-")))
CERT = FRONT / "front-cert.pem"  # what the front presents: the tests and the issuers trust it
ISSUER = f"http://127.0.0.1:{IDP_PORT}"
PUBLIC_URL = f"https://127.0.0.1:{FRONT_PORT}"
AUDIENCE = f"http://127.0.0.1:{UPSTREAM_PORT}/mcp"
UPSTREAM = {"url": AUDIENCE,
            "auth": {"type": "token-exchange", "audience": AUDIENCE, "scopes": ["upstream:read"]}}  # fmt: skip
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "groups": {
        "engineers": {
            "tools": ["upstream:*", "tickets:*", "notes:*"],
            "scopes": ["agentcards:read", "agentcards:execute"],
        },
    },
}
OWN_ISSUER = f"http://127.0.0.1:{OWN_IDP_PORT}"
TICKETS = f"http://127.0.0.1:{TICKETS_PORT}/mcp"
CIMD_ISSUER = f"http://127.0.0.1:{CIMD_IDP_PORT}"
NOTES = f"http://127.0.0.1:{NOTES_PORT}/mcp"
OUT = Path(tempfile.gettempdir()) / "agentcards-upstream-identity"  # the two-people table
WHOAMI = """
try:
    return await mcp.upstream.whoami()
except ToolCallError as e:
    return {"error": e.type, "message": str(e), "url": e.url}
"""

SERVERS = {
    "upstream": UPSTREAM,
    "tickets": {"url": TICKETS, "auth": {"type": "oauth"}},
    "notes": {"url": NOTES, "auth": {"type": "oauth"}},
}
stack = stack_fixture(
    lambda tmp: SERVERS,
    learning=False,
    synced_servers=1,  # tickets and notes list their tools once a person connected them
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT)
    | {"public_url": PUBLIC_URL},
)


@pytest.fixture(scope="module", autouse=True)
def front() -> Iterator[Path]:
    """The gateway's https front (its certificate in ``CERT``)."""
    with tls_front(FRONT, port=FRONT_PORT, backend_port=GATEWAY_PORT) as cert:
        yield cert


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


@pytest.fixture(scope="module")
def cimd_idp(tmp_path_factory: pytest.TempPathFactory, front: Path) -> Iterator[IdentityProvider]:
    """`notes`' authorization server: it takes client ID metadata documents (fetching them
    from the gateway's https front, whose certificate it trusts)."""
    tmp = tmp_path_factory.mktemp("cimd-idp")
    env = {"IDP_CIMD": "1", "NODE_EXTRA_CA_CERTS": str(front)}
    with running_provider(tmp, port=CIMD_IDP_PORT, resource="http://127.0.0.1:9/none",
                          env=env) as provider:  # fmt: skip
        yield provider


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory, cimd_idp: IdentityProvider) -> Iterator[Path]:
    """An OAuth server whose authorization server takes client ID metadata documents."""
    with upstream_server(tmp_path_factory.mktemp("notes"), NOTES_PORT, CIMD_ISSUER, NOTES) as log:
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
READ_ME = WHOAMI.replace("mcp.upstream.whoami()", "mcp.tickets.read_resource('whoami://me')")
WRITE_TICKET = WHOAMI.replace("mcp.upstream.whoami()", "mcp.tickets.write_ticket(title='printer')")


def test_people_connect_a_server_of_its_own_once(
    idp: IdentityProvider, seen: Path, own_idp: IdentityProvider, tickets: Path, stack: E2EStack
) -> None:
    """Alice connects `tickets` through a link (its own authorization server: discovery from
    the 401, dynamic registration, PKCE), hers only: Erin, signed in, is refused it and it
    stays unused; alice, not signed in, signs in on the way; the answer counts only in her
    browser; a used, expired or unknown link says so; Erin, not connected, gets `authorization_required`
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
        # The gateway's client ID metadata document, for any authorization server to fetch
        # (no token); an http gateway never offers it as its client_id, and registers.
        served = client.get("/oauth/client-metadata.json")
        assert served.status_code == 200, served.text
        assert served.json()["client_id"] == f"{PUBLIC_URL}/oauth/client-metadata.json"
        assert served.json()["redirect_uris"] == [f"{PUBLIC_URL}/oauth/callback"]
        # Nobody connected yet, its tools unknown: a call is asked to connect, from code and
        # directly; a server that does not exist stays unknown.
        early = run(client, erin, WHOAMI_TICKETS)
        assert early["error"] == "authorization_required", early
        assert early["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), early
        for modern in (False, True):  # at 2025-11-25 and at 2026-07-28: the link structured
            direct = tool_error(asyncio.run(_direct_whoami(stack, erin, modern=modern)))
            assert direct["type"] == "authorization_required", direct
            assert direct["details"]["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), direct
            assert direct["details"]["url"] in direct["message"], direct
            # Refused again and again: the same link while it is open (not one per refusal).
            assert direct["details"]["url"] == early["url"], (direct, early)
        assert run(client, erin, WHOAMI.replace("mcp.upstream", "mcp.nosuch"))["error"] == (
            "unknown_tool"
        )
        assert client.get("/v1/connections", headers=alice).json() == {"connections": []}
        link = client.post("/v1/connections/tickets", headers=alice).json()["url"]
        assert link.startswith(f"{PUBLIC_URL}/oauth/connect/")
        transcript.append(f"POST /v1/connections/tickets (alice) -> {link}")
        # The link is alice's only: Erin, signed in, is refused and the link stays unused;
        # alice, not signed in yet, goes through sign-in and comes back to it.
        browsers = {user: _browser() for user in ("alice", "erin", "stranger")}
        _sign_in(browsers["erin"], idp, "erin")
        theirs = browsers["erin"].get(link.removeprefix(PUBLIC_URL))
        assert theirs.status_code == 403 and "someone else" in theirs.text, theirs.text
        assert "signed in as erin" in theirs.text and "was not used" in theirs.text
        transcript.append(f"GET /oauth/connect/… (erin's browser) -> {theirs.status_code} "
                          "This link is someone else's")  # fmt: skip
        callback = _authorize(browsers["alice"], link, own_idp, "alice", transcript, idp=idp)
        used = browsers["alice"].get(link.removeprefix(PUBLIC_URL))
        assert used.status_code == 410 and "used already" in used.text, used.text
        # The answer counts only in the browser that opened the link, signed in as its person.
        for other in ("erin", "stranger"):
            elsewhere = browsers[other].get("/oauth/callback", params=callback)
            assert elsewhere.status_code == 400, elsewhere.text
            assert "opened no connect link" in elsewhere.text, elsewhere.text
        forged = browsers["alice"].get("/oauth/callback", params={**callback, "state": "forged"})
        assert forged.status_code == 400 and "names no connection" in forged.text
        assert client.get("/v1/connections", headers=alice).json() == {"connections": []}
        done = browsers["alice"].get("/oauth/callback", params=callback)
        transcript.append(f"GET /oauth/callback?code=…&state=… -> {done.status_code}")
        assert done.status_code == 200 and "Connected to tickets" in done.text, done.text
        replayed = browsers["alice"].get("/oauth/callback", params=callback)
        assert replayed.status_code == 400, replayed.text
        # A link past its ten minutes, and one never made here, say so and do nothing.
        late = client.post("/v1/connections/tickets", headers=alice).json()["url"]
        _age(stack, late)
        expired_page = browsers["alice"].get(late.removeprefix(PUBLIC_URL))
        assert expired_page.status_code == 410 and "has expired" in expired_page.text
        unknown = browsers["alice"].get("/oauth/connect/" + "x" * 43)
        assert unknown.status_code == 404 and "not known" in unknown.text, unknown.text
        listed = client.get("/v1/connections", headers=alice).json()["connections"]
        assert [c["server"] for c in listed] == ["tickets"]
        assert _stored_auth_method(stack, "alice") == "none"  # as registered there: public
        # Registered as what it is: a web client (a server), not a native app.
        registered = [json.loads(line.removeprefix("registered ")) for line in
                      _idp_log(own_idp).splitlines() if line.startswith("registered ")]  # fmt: skip
        assert len(registered) == 1, registered  # once per authorization server and process
        assert registered[0]["application_type"] == "web", registered
        assert registered[0]["redirect_uris"] == [f"{PUBLIC_URL}/oauth/callback"], registered
        transcript.append(f"(registration at {OWN_ISSUER}: {json.dumps(registered[0])})")
        wait_until(
            lambda: any(t["id"] == "tickets:whoami" for t in client.get(
                "/v1/tools", headers=alice).json()["tools"]),
            what="tickets' tools, listed by a connected person's session", timeout_s=60,
        )  # fmt: skip
        first_calls = {"alice": run(client, alice, WHOAMI_TICKETS)}
        assert first_calls["alice"]["sub"] == "alice", first_calls
        asked = first_calls["erin"] = run(client, erin, WHOAMI_TICKETS)
        assert asked["error"] == "authorization_required", asked
        assert asked["url"] == early["url"], asked  # her link, still open and unused
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        # Two flows at once: a code redeemed with the other flow's state (its PKCE verifier)
        # is refused, and the code is then used up.
        first = _authorize(browsers["erin"], asked["url"], own_idp, "erin", [])
        renewed = client.post("/v1/connections/tickets", headers=erin).json()["url"]
        assert renewed != asked["url"], renewed  # that one is used now: a new one
        second = _authorize(browsers["erin"], renewed, own_idp, "erin", [])
        crossed = browsers["erin"].get("/oauth/callback",
                                       params={**first, "state": second["state"]})  # fmt: skip
        assert crossed.status_code == 400 and "refused the code" in crossed.text, crossed.text
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        assert browsers["erin"].get("/oauth/callback", params=first).status_code == 200
        both = {user: run(client, headers, WHOAMI_TICKETS) for user, headers in
                (("alice", alice), ("erin", erin))}  # fmt: skip
        assert {user: seen["sub"] for user, seen in both.items()} == {"alice": "alice",
                                                                      "erin": "erin"}  # fmt: skip
        _expire(stack, "alice")  # as if her access token had run out: her call renews it
        assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"
        # Step up: write_ticket needs upstream:write, which her connection does not grant.
        stepped = run(client, alice, WRITE_TICKET)
        assert stepped["error"] == "authorization_required", stepped
        assert "scope upstream:write" in stepped["message"], stepped
        assert run(client, alice, WHOAMI_TICKETS)["sub"] == "alice"  # kept meanwhile
        wider = _authorize(browsers["alice"], stepped["url"], own_idp, "alice", transcript,
                           "step up")  # fmt: skip
        assert browsers["alice"].get("/oauth/callback", params=wider).status_code == 200
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
        back = _authorize(browsers["erin"], expired["url"], own_idp, "erin", [])
        assert browsers["erin"].get("/oauth/callback", params=back).status_code == 200
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
            page = browsers["alice"].get(link.removeprefix(PUBLIC_URL))
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
        # A client that declared URL-mode elicitation is asked to connect instead: its person
        # opens the link (signed in) while the call waits, then the call goes ahead; at both
        # revisions.
        for modern in (False, True):
            prompts: list[types.ElicitRequestURLParams] = []
            elicit = _connecting(browsers["alice"], own_idp, "alice", prompts)
            called = asyncio.run(_direct_whoami(stack, alice, modern=modern, elicitation=elicit))
            assert not called.is_error, called
            assert (called.structured_content or {}).get("sub") == "alice", called
            assert len(prompts) == 1 and prompts[0].url.startswith(f"{PUBLIC_URL}/oauth/connect/")
            assert "tickets" in prompts[0].message, prompts
            assert modern or prompts[0].elicitation_id, prompts  # 2026-07-28 has no id
            transcript.append(f"URL elicitation ({'2026-07-28' if modern else '2025-11-25'}): "
                              f"asked to open {prompts[0].url.split('/oauth')[0]}/oauth/connect/…,"
                              " connected in the browser, the call went ahead as alice")  # fmt: skip
            assert client.delete("/v1/connections/tickets", headers=alice).status_code == 204
        keyed = stack.as_new_tenant("acme")
        assert run(client, keyed.headers, WHOAMI_TICKETS)["error"] == "authorization_required"
        # Erin's grant revoked at the provider: the server refuses her token mid-session (401).
        tickets.with_name(tickets.name + ".revoked").write_text("erin\n")
        revoked = run(client, erin, WHOAMI_TICKETS)
        assert revoked["error"] == "authorization_required", revoked
        assert revoked["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), revoked
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
    for browser in browsers.values():
        browser.close()
    shown = [json.loads(line) for line in tickets.read_text().splitlines()]
    assert all(s["taken"] != s["revoked"] and s["aud"] == TICKETS for s in shown), shown
    assert {s["sub"] for s in shown if s["revoked"]} == {"erin"}
    alices = {s["token"] for s in shown if s["sub"] == "alice"}
    toolhost = stack.procs["toolhost"].log_path.read_text(errors="replace")
    # Connected, renewed, stepped up, then connected twice through URL elicitation: five.
    assert len(alices) == 5, "\n".join(x for x in toolhost.splitlines() if "tickets" in x)
    assert {s["sub"] for s in shown} == {"alice", "erin"}
    OUT.mkdir(exist_ok=True)
    (OUT / "connect-transcript.txt").write_text("\n".join(transcript) + "\n")
    (OUT / "two-people-oauth.md").write_text(
        "| caller | tickets:whoami: upstream saw sub |\n| --- | --- |\n"
        f"| alice (connected) | {first_calls['alice']['sub']} |\n"
        f"| erin (not connected) | (refused: {first_calls['erin']['error']}, her own link) |\n"
        + "".join(f"| {user} (both connected) | {seen['sub']} |\n" for user, seen in both.items())
    )
    (OUT / "expired.txt").write_text(json.dumps(expired, indent=2) + "\n")
    (OUT / "step-up.txt").write_text(json.dumps(stepped, indent=2) + "\n")
    (OUT / "authorization-server-down.txt").write_text(
        json.dumps(down, indent=2) + f"\nconnect page: {page.status_code} {page.text}\n"
    )
    _no_plaintext(stack, {s["token"] for s in shown})


async def _direct_whoami(
    stack: E2EStack, headers: dict[str, str], *, modern: bool = False,
    elicitation: Any = None,
) -> types.CallToolResult:  # fmt: skip
    """``whoami`` called directly on ``tickets``' own endpoint with the MCP SDK's client, at
    2025-11-25 (a session) or 2026-07-28 (``modern``); ``elicitation``: the client's callback
    (the SDK then declares form and URL elicitation)."""
    if not modern:
        async with mcp_session(stack, path="/mcp/servers/tickets", headers=headers,
                               elicitation_callback=elicitation) as session:  # fmt: skip
            return await session.call_tool("whoami", {})
    url = f"{stack.gateway_url}/mcp/servers/tickets"
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(
            streamable_http_client(url, http_client=http), elicitation_callback=elicitation
        ) as client,  # fmt: skip
    ):
        assert client.protocol_version == "2026-07-28"
        return await client.call_tool("whoami", {})


def _connecting(
    browser: httpx.Client, own: IdentityProvider, user: str,
    asked: list[types.ElicitRequestURLParams],
) -> Any:  # fmt: skip
    """A client's URL elicitation callback: its person opens the link in their browser (in the
    background, as a client that opens a browser answers at once) and connects ``user``."""

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        asked.append(params)

        def connect() -> None:
            answer = _authorize(browser, params.url, own, user, [])
            assert browser.get("/oauth/callback", params=answer).status_code == 200

        threading.Thread(target=connect, daemon=True).start()
        return types.ElicitResult(action="accept")

    return elicitation


def _stored_auth_method(stack: E2EStack, user: str) -> str | None:
    """How the person's connection to ``tickets`` authenticates at its token endpoint."""
    with psycopg.connect(stack.settings.database_url or "") as conn:
        row = conn.execute("SELECT auth_method FROM upstream_connections WHERE user_id = %s "
                           "AND server = 'tickets'", (user,)).fetchone()  # fmt: skip
    assert row is not None, user
    return None if row[0] is None else str(row[0])


def _expire(stack: E2EStack, user: str) -> None:
    """As if the person's stored access token for ``tickets`` had run out (the provider's
    tokens last ten minutes): their next call renews it first."""
    with psycopg.connect(stack.settings.database_url or "", autocommit=True) as conn:
        conn.execute("UPDATE upstream_connections SET expires_at = now() - interval '1 second' "
                     "WHERE user_id = %s AND server = 'tickets'", (user,))  # fmt: skip


def _browser() -> httpx.Client:
    """A browser of the gateway's: it keeps the cookies the gateway sets (not redirected)."""
    trusted = ssl.create_default_context(cafile=CERT)
    # A connection per request: the front passes the gateway's closing of an idle
    # connection on, which a request sent on it at that moment would meet.
    fresh = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(base_url=PUBLIC_URL, timeout=60, follow_redirects=False, verify=trusted,
                        limits=fresh)  # fmt: skip


def _sign_in(browser: httpx.Client, idp: IdentityProvider, user: str,
             start: str = "/dashboard/login") -> httpx.Response:  # fmt: skip
    """Sign ``browser`` in to the gateway as ``user`` from ``start`` (the login page, or where
    a page sent it to sign in): the answer after the gateway's callback (303 to ``next``)."""
    asked = browser.get(start)
    assert asked.status_code == 303 and asked.headers["location"].startswith(ISSUER), asked.text
    back = idp.sign_in(asked.headers["location"], user)
    assert back.startswith(f"{PUBLIC_URL}/dashboard/callback"), back
    signed_in = browser.get(back.removeprefix(PUBLIC_URL))
    assert signed_in.status_code == 303, signed_in.text
    return signed_in


def _age(stack: E2EStack, link: str) -> None:
    """As if the link's ten minutes had passed (its record says when it expires)."""
    key = CONNECT_LINK_PREFIX + hashlib.sha256(link.rsplit("/", 1)[1].encode()).hexdigest()
    client_redis = redis.Redis.from_url(stack.settings.redis_url or "")
    record = json.loads(client_redis.get(key) or b"{}")
    assert record.get("expires_at"), record
    client_redis.set(key, json.dumps({**record, "expires_at": time.time() - 1}), keepttl=True)


def _authorize(
    browser: httpx.Client, link: str, own: IdentityProvider, user: str, transcript: list[str],
    what: str = "connect", *, idp: IdentityProvider | None = None,
) -> dict[str, str]:  # fmt: skip
    """Open a connect link in ``user``'s browser and sign in at the server's own authorization
    server as ``user``: the query the callback gets (code, state, iss). ``idp``: the browser
    is not signed in to the gateway yet, and signs in there as ``user`` on the way."""
    opened = browser.get(link.removeprefix(PUBLIC_URL))
    if idp is not None:
        login = opened.headers.get("location", "")
        assert opened.status_code == 303 and login.startswith("/dashboard/login?next="), login
        transcript.append(f"{what}: GET /oauth/connect/… (not signed in) -> 303 {login[:40]}…")
        signed = _sign_in(browser, idp, user, start=login)
        assert signed.headers["location"] == link.removeprefix(PUBLIC_URL), signed.headers
        transcript.append(f"BROWSER sign-in as {user} at {ISSUER} -> back to /oauth/connect/…")
        opened = browser.get(link.removeprefix(PUBLIC_URL))
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


def test_an_authorization_server_fetches_the_gateways_client_metadata_document(
    idp: IdentityProvider, cimd_idp: IdentityProvider, notes: Path, stack: E2EStack
) -> None:
    """`notes`' authorization server takes client ID metadata documents: the gateway (its
    public URL https) names its document's URL as its client_id there and registers nothing;
    the authorization server fetches the document from the gateway
    (`GET /oauth/client-metadata.json`), Alice connects, and `notes` then serves her as her."""
    alice = {"Authorization": f"Bearer {idp.token('alice')}"}
    document = f"{PUBLIC_URL}/oauth/client-metadata.json"
    with httpx.Client(base_url=stack.gateway_url, timeout=120) as client, _browser() as browser:
        _sign_in(browser, idp, "alice")
        link = client.post("/v1/connections/notes", headers=alice).json()["url"]
        opened = browser.get(link.removeprefix(PUBLIC_URL))
        assert opened.status_code == 303, opened.text
        authorize = opened.headers["location"]
        asked = redirect_params(authorize)
        assert authorize.startswith(CIMD_ISSUER) and asked["client_id"] == document, asked
        assert asked["code_challenge_method"] == "S256" and asked["resource"] == NOTES, asked
        back = cimd_idp.sign_in(authorize, "alice")
        assert back.startswith(f"{PUBLIC_URL}/oauth/callback"), back
        log = _idp_log(cimd_idp).splitlines()
        fetched = {line for line in log if line.startswith("fetched client metadata document")}
        assert fetched == {f"fetched client metadata document {document}"}, log
        assert not [line for line in log if line.startswith("registered ")], log
        done = browser.get("/oauth/callback", params=redirect_params(back))
        assert done.status_code == 200 and "Connected to notes" in done.text, done.text
        with psycopg.connect(stack.settings.database_url or "") as conn:
            row = conn.execute("SELECT client_id, auth_method FROM upstream_connections "
                               "WHERE user_id = 'alice' AND server = 'notes'").fetchone()  # fmt: skip
        assert row == (document, "none"), row  # no registered client, no secret
        read = asyncio.run(_read_me(stack, alice, "notes"))
        assert read["sub"] == "alice" and read["aud"] == NOTES, read
        assert client.delete("/v1/connections/notes", headers=alice).status_code == 204
    OUT.mkdir(exist_ok=True)
    (OUT / "cimd.txt").write_text(
        f"GET /oauth/connect/… -> 303 {authorize.split('?')[0]} (client_id={asked['client_id']})\n"
        + "\n".join(sorted(fetched))
        + "\n"
        + f"GET /oauth/callback -> {done.status_code}; upstream_connections row {row}\n"
        + f"resources/read whoami://me on notes as alice -> sub={read['sub']}\n"
    )


async def _read_me(stack: E2EStack, headers: dict[str, str], server: str) -> dict[str, Any]:
    """``whoami://me`` of ``server`` read through its direct endpoint as ``headers``' caller."""
    async with mcp_session(stack, path=f"/mcp/servers/{server}", headers=headers) as session:
        read = await session.read_resource("whoami://me")
    text = read.contents[0].text  # type: ignore[union-attr]
    answer: dict[str, Any] = json.loads(text)
    return answer


def test_resources_and_prompts_are_each_persons_own(
    idp: IdentityProvider, seen: Path, own_idp: IdentityProvider, tickets: Path, stack: E2EStack
) -> None:
    """A server that acts for people serves their resources, resource templates and prompts
    as it serves their calls: on each person's own session, through its direct endpoint,
    `/mcp` (code and direct mode) and REST. Alice connected `tickets`: she reads it as
    herself; Erin, who has not, is asked to connect (`authorization_required`, a link of her
    own) and sees none of Alice's; a key is refused without a link. The token-exchange
    server serves both people as themselves. A client that declared URL elicitation is asked
    to connect through it when it reads or gets (on the direct endpoint at both revisions, on
    `/mcp`), and the request goes ahead once connected."""
    tickets.with_name(tickets.name + ".revoked").write_text("")  # the previous test's revocation
    before = len(tickets.read_text().splitlines())
    alice = {"Authorization": f"Bearer {idp.token('alice')}"}
    erin = {"Authorization": f"Bearer {idp.token('erin')}"}
    keyed = stack.as_new_tenant("acme")
    with httpx.Client(base_url=stack.gateway_url, timeout=120) as client, _browser() as browser:
        _sign_in(browser, idp, "alice")
        link = client.post("/v1/connections/tickets", headers=alice).json()["url"]
        back = _authorize(browser, link, own_idp, "alice", [])
        assert browser.get("/oauth/callback", params=back).status_code == 200
        assert client.get("/v1/connections", headers=erin).json() == {"connections": []}
        wait_until(
            lambda: any(t["id"] == "tickets:whoami" for t in client.get(
                "/v1/tools", headers=alice).json()["tools"]),
            what="tickets' tools (agent code reads the resources of a server in its scope)",
            timeout_s=60,
        )  # fmt: skip
        table = ["| caller | surface | request | upstream saw |", "| --- | --- | --- | --- |"]
        for user, headers in (("alice", alice), ("erin", erin), ("API key", keyed.headers)):
            for server in ("tickets", "upstream"):
                seen_as = asyncio.run(_personal_view(stack, headers, server))
                table += [f"| {user} | /mcp/servers/{server} | {op} | {what} |"
                          for op, what in seen_as.items()]  # fmt: skip
                if user == "API key":  # names no person: refused, and no link
                    assert all(w.startswith("authorization_required (no link") for w in
                               seen_as.values()), seen_as  # fmt: skip
                elif server == "tickets" and user == "erin":  # not connected: a link of hers
                    assert all(w.startswith("authorization_required, link") for w in
                               seen_as.values()), seen_as  # fmt: skip
                else:  # lists say nothing of whose they are; reads and prompts do
                    assert set(seen_as.values()) == {user, "listed"}, (user, server, seen_as)
        for user, headers in (("alice", alice), ("erin", erin)):
            aggregate = asyncio.run(_aggregate_view(stack, headers))
            table += [f"| {user} | {op} | | {what} |" for op, what in aggregate.items()]
            for op, what in aggregate.items():
                expected = user if user == "alice" or "upstream" in op else None  # connected
                if expected is None:
                    assert what.startswith(("authorization_required, link", "not listed")), op
                else:
                    assert what == expected, (user, op, what)
        for user, headers in (("alice", alice), ("erin", erin)):  # agent code, as its person
            read = run(client, headers, READ_ME)
            if user == "alice":
                assert "contents" in read, read
                assert json.loads(read["contents"][0]["text"])["sub"] == "alice", read
            else:
                assert read["error"] == "authorization_required", read
                assert read["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), read
            table.append(f"| {user} | code: mcp.tickets.read_resource | whoami://me | "
                         f"{'alice' if user == 'alice' else read['error'] + ', link'} |")  # fmt: skip
        listed = client.get("/v1/resources", headers=erin).json()
        assert "tickets" not in {r["server"] for r in listed["resources"]}, listed
        assert "not connected" in listed["errors"]["tickets"], listed
        read = client.get("/v1/resources/read", headers=erin,
                          params={"server": "tickets", "uri": "whoami://me"})  # fmt: skip
        assert read.status_code == 403, read.text
        error = read.json()["error"]
        assert error["type"] == "authorization_required", error
        assert error["details"]["url"].startswith(f"{PUBLIC_URL}/oauth/connect/"), error
        table.append(f"| erin | GET /v1/resources/read (tickets) | | {read.status_code} "
                     f"{error['type']}, link |")  # fmt: skip
        mine = client.get("/v1/resources/read", headers=alice,
                          params={"server": "tickets", "uri": "whoami://me"})  # fmt: skip
        assert json.loads(mine.json()["contents"][0]["text"])["sub"] == "alice", mine.text
        table.append("| alice | GET /v1/resources/read (tickets) | | alice |")
        keyed_read = client.get("/v1/resources/read", headers=keyed.headers,
                                params={"server": "tickets", "uri": "whoami://me"})  # fmt: skip
        assert keyed_read.status_code == 403, keyed_read.text
        assert "url" not in (keyed_read.json()["error"].get("details") or {}), keyed_read.text
        assert client.delete("/v1/connections/tickets", headers=alice).status_code == 204
        # Erin's client declared URL elicitation: asked to connect when she reads or gets,
        # as a call is; she opens the link, signed in, and the request goes ahead as her.
        with _browser() as hers:
            _sign_in(hers, idp, "erin")
            for path, modern in (("/mcp/servers/tickets", False), ("/mcp/servers/tickets", True),
                                 ("/mcp", False)):  # fmt: skip
                prompts: list[types.ElicitRequestURLParams] = []
                elicit = _connecting(hers, own_idp, "erin", prompts)
                op, got = asyncio.run(_asked_to_connect(stack, erin, elicit, path, modern=modern))
                assert got == "erin", (path, op, got)
                assert len(prompts) == 1, prompts
                assert prompts[0].url.startswith(f"{PUBLIC_URL}/oauth/connect/"), prompts
                assert "tickets" in prompts[0].message, prompts
                table.append(f"| erin (URL elicitation) | {path} | {op} | asked "
                             f"to connect, connected: {got} |")  # fmt: skip
                assert client.delete("/v1/connections/tickets", headers=erin).status_code == 204
    shown = [json.loads(line) for line in tickets.read_text().splitlines()[before:]]
    assert {s["sub"] for s in shown} == {"alice", "erin"}, shown  # erin once she connected
    OUT.mkdir(exist_ok=True)
    (OUT / "resources-two-people.md").write_text("\n".join(table) + "\n")


async def _asked_to_connect(
    stack: E2EStack, headers: dict[str, str], elicitation: Any, path: str, *, modern: bool
) -> tuple[str, str]:
    """On ``path`` (``tickets``' direct endpoint or ``/mcp``), with a client that declared URL
    elicitation: ``resources/read`` of its ``whoami://me`` at 2025-11-25 (a session),
    ``prompts/get greeting`` at 2026-07-28; the request and whom the upstream saw."""
    if not modern:
        uri = "whoami://me" if path != "/mcp" else "agentcards://tickets/whoami://me"
        async with mcp_session(stack, path=path, headers=headers,
                               elicitation_callback=elicitation) as session:  # fmt: skip
            op = f"resources/read {uri}"
            return op, _subject_of(op, await session.read_resource(uri))
    url = f"{stack.gateway_url}{path}"
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(
            streamable_http_client(url, http_client=http), elicitation_callback=elicitation
        ) as client,  # fmt: skip
    ):
        assert client.protocol_version == "2026-07-28"
        op = "prompts/get greeting"
        return op, _subject_of(op, await client.get_prompt("greeting"))


async def _personal_view(stack: E2EStack, headers: dict[str, str], server: str) -> dict[str, str]:
    """What each resources and prompts request on ``server``'s direct endpoint saw of the
    caller: the upstream's subject, or the refusal (``authorization_required``, with a link
    of the gateway's or none)."""
    requests: dict[str, Any] = {
        "resources/list": lambda s: s.list_resources(),
        "resources/templates/list": lambda s: s.list_resource_templates(),
        "resources/read whoami://me": lambda s: s.read_resource("whoami://me"),
        "resources/read whoami://tickets/bob": lambda s: s.read_resource("whoami://tickets/bob"),
        "prompts/list": lambda s: s.list_prompts(),
        "prompts/get greeting": lambda s: s.get_prompt("greeting"),
    }
    seen_as: dict[str, str] = {}
    async with mcp_session(stack, path=f"/mcp/servers/{server}", headers=headers) as session:
        for op, request in requests.items():
            try:
                answer = await request(session)
            except MCPError as exc:
                seen_as[op] = _refusal(exc)
                continue
            seen_as[op] = _subject_of(op, answer)
    return seen_as


async def _aggregate_view(stack: E2EStack, headers: dict[str, str]) -> dict[str, str]:
    """The same where every server's are served together: `/mcp` (resources
    ``agentcards://<server>/<uri>``, in any mode) and `/mcp/servers` (those, and prompts
    ``<server>.<prompt>``)."""
    seen_as: dict[str, str] = {}
    for path in ("/mcp", "/mcp/servers"):
        async with mcp_session(stack, path=path, headers=headers) as session:
            uris = {str(r.uri) for r in (await session.list_resources()).resources}
            names = set()
            if path == "/mcp/servers":
                names = {p.name for p in (await session.list_prompts()).prompts}
            for server in ("tickets", "upstream"):
                uri = f"agentcards://{server}/whoami://me"
                op = f"{path} resources/read {uri}"
                try:
                    seen_as[op] = _subject_of(op, await session.read_resource(uri))
                except MCPError as exc:
                    seen_as[op] = _refusal(exc)
                listed = seen_as[op] if uri in uris else "not listed"
                seen_as[f"{path} resources/list ({server})"] = listed
                if path == "/mcp/servers":
                    op = f"{path} prompts/get {server}.greeting"
                    try:
                        answer = await session.get_prompt(f"{server}.greeting")
                        seen_as[op] = _subject_of(op, answer)
                    except MCPError as exc:
                        seen_as[op] = _refusal(exc)
                    listed = seen_as[op] if f"{server}.greeting" in names else "not listed"
                    seen_as[f"{path} prompts/list ({server})"] = listed
    return seen_as


def _subject_of(op: str, answer: Any) -> str:
    """Whose view an answer is: the subject the upstream reported."""
    if isinstance(answer, types.ReadResourceResult):
        return str(json.loads(answer.contents[0].text)["sub"])  # type: ignore[union-attr]
    if isinstance(answer, types.GetPromptResult):
        text = answer.messages[0].content.text  # type: ignore[union-attr]
        return str(text).removeprefix("Hello ")
    if isinstance(answer, types.ListResourcesResult):
        found = [str(r.uri) for r in answer.resources]
        assert found == ["whoami://me"], found
    elif isinstance(answer, types.ListResourceTemplatesResult):
        found = [t.uri_template for t in answer.resource_templates]
        assert found == ["whoami://tickets/{owner}"], found
    elif isinstance(answer, types.ListPromptsResult):
        found = [p.name for p in answer.prompts]
        assert found == ["greeting"], found
    return "listed" if op.endswith("list") else repr(answer)


def _refusal(exc: MCPError) -> str:
    """A JSON-RPC refusal as the table shows it: its type and whether it carries a link."""
    body = exc.error.data or {}
    url = (body.get("details") or {}).get("url")
    assert body.get("type") == "authorization_required", exc.error
    if url is None:
        return "authorization_required (no link)"
    assert url.startswith(f"{PUBLIC_URL}/oauth/connect/") and url in exc.error.message, exc.error
    return "authorization_required, link"
