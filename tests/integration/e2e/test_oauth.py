"""People sign in at a real identity provider (npm `oidc-provider`) and use the stack with
its tokens: the MCP SDK's OAuth client discovers the issuer from the gateway's 401 and runs
code at both revisions; bad tokens are refused with a reason; scopes, groups and tenants
limit people over MCP and REST alike; keys keep working beside tokens.

Its own stack: the gateway's settings name the provider and a public URL (a fixed port).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pgserver  # type: ignore[import-untyped]
import pytest
import redis
from joserfc.jwk import ECKey
from mcp import Client, ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from typer.testing import CliRunner

from deploy.cli.main import app
from deploy.connect.clients import CLIENTS, Platform
from shared.auth.store import issue_key
from shared.config import get_settings, settings_to_env
from shared.db import connect
from tests.client_files import parse_as_client
from tests.integration.identity.provider import (
    IdentityProvider,
    dpop_proof,
    free_port,
    gateway_options,
    redirect_params,
    redis_value,
    running_provider,
    signing_keys,
)
from tests.integration.mcp_servers import time_server
from tests.integration.scale.round_robin import RoundRobin
from tests.stack import E2EStack, stack_fixture, wait_until

IDP_PORT, GATEWAY_PORT = free_port(), free_port()
ISSUER = f"http://127.0.0.1:{IDP_PORT}"
PUBLIC_URL = f"http://127.0.0.1:{GATEWAY_PORT}"
RESOURCE = f"{PUBLIC_URL}/mcp"
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "default_tenant": "acme",
    "groups": {
        "engineers": {"tools": ["time:*"], "scopes": ["agentcards:read", "agentcards:execute"],
                      "rate_limit_per_min": 60},
        "readers": {"scopes": ["agentcards:read"]},
        "admins": {"scopes": ["agentcards:read", "agentcards:execute", "agentcards:admin"]},
    },
}  # fmt: skip
OUT = Path(tempfile.gettempdir()) / "agentcards-oauth"  # the transcript and refusal table

stack = stack_fixture(
    lambda tmp: {"time": time_server()},
    learning=False,
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT),
    oauth_token_cache_s=0,  # a revoked opaque token is refused on the next request
)
NOW_CODE = "return await mcp.time.get_current_time(timezone='UTC')"


@pytest.fixture(scope="module")
def idp(stack: E2EStack) -> Iterator[IdentityProvider]:
    with running_provider(stack.tmp, port=IDP_PORT, resource=RESOURCE) as provider:
        yield provider


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rest(stack: E2EStack) -> httpx.Client:
    return httpx.Client(base_url=stack.gateway_url, timeout=60)


def test_no_credential_is_answered_401_pointing_to_the_metadata(stack: E2EStack) -> None:
    """Loopback included: with an issuer there is no anonymous caller."""
    with rest(stack) as client:
        for path, method in (("/mcp", "POST"), ("/mcp/servers/time", "POST"), ("/v1/tools", "GET")):
            refused = client.request(method, path, json={})
            assert refused.status_code == 401, (path, refused.text)
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
            url = challenge.split('resource_metadata="')[1].split('"')[0]
            meta = client.get(url.removeprefix(PUBLIC_URL)).json()
            assert meta["resource"] == RESOURCE and meta["authorization_servers"] == [ISSUER]
            assert meta["scopes_supported"] == [
                "agentcards:read", "agentcards:execute", "agentcards:admin"
            ]  # fmt: skip
            assert meta["bearer_methods_supported"] == ["header"]


class Memory:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def signing_in(idp: IdentityProvider, url: str, transcript: list[str]) -> OAuthClientProvider:
    """The SDK's OAuth client for ``url``, signing in at the provider as alice (the browser's
    steps noted in ``transcript``)."""
    landed: dict[str, str] = {}

    async def redirect(url: str) -> None:
        back = await anyio.to_thread.run_sync(idp.sign_in, url, "alice")
        landed.update(redirect_params(back))
        asked = redirect_params(url)
        transcript.append(f"BROWSER {url.split('?')[0]} (resource={asked.get('resource')}, "
                          f"scope={asked.get('scope')}, PKCE {asked.get('code_challenge_method')})"
                          f" -> login + consent as alice -> redirect with code")  # fmt: skip

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=landed["code"], state=landed.get("state"),
                                       iss=landed.get("iss"))  # fmt: skip

    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="agentcards oauth test",
            redirect_uris=["http://127.0.0.1/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            application_type="native",
        ),
        storage=Memory(),
        redirect_handler=redirect,
        callback_handler=callback,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_signs_in_and_runs_code(
    stack: E2EStack, idp: IdentityProvider, mode: str
) -> None:
    """The whole MCP authorization flow: 401 → resource metadata → issuer metadata → dynamic
    registration → authorization code + PKCE (the provider's login, scripted) → token → call."""
    transcript: list[str] = []
    auth = signing_in(idp, RESOURCE, transcript)

    async def on_response(response: Any) -> None:
        request = response.request
        transcript.append(f"{request.method} {request.url} -> {response.status_code}"
                          + (f" [{response.headers['www-authenticate']}]"
                             if "www-authenticate" in response.headers else ""))  # fmt: skip

    async with create_mcp_http_client(auth=auth) as http:
        http.event_hooks["response"].append(on_response)
        async with Client(streamable_http_client(RESOURCE, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            revision = client.protocol_version
            result = await client.call_tool("execute_code", {"code": NOW_CODE})
    assert not result.is_error, result.content
    assert revision == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert transcript[0].endswith("-> 401 " + transcript[0].split(" -> 401 ")[1])
    assert any("/.well-known/oauth-protected-resource/mcp -> 200" in t for t in transcript)
    assert any(f"{ISSUER}/token -> 200" in t for t in transcript)
    OUT.mkdir(exist_ok=True)
    (OUT / f"transcript-{revision}.txt").write_text("\n".join(transcript) + "\n")
    with connect(stack.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT e.user_id, e.tenant_id, a.user_id AS audited FROM executions e "
            "JOIN audit_log a ON a.execution_id = e.id ORDER BY e.created_at DESC LIMIT 1"
        ).fetchone()
    assert row == {"user_id": "alice", "tenant_id": "acme", "audited": "alice"}


def _revoked(idp: IdentityProvider) -> str:
    token = idp.token("alice", opaque=True)
    idp.revoke(token, "alice")
    return token


REFUSALS: dict[str, tuple[Any, str]] = {
    "expired": (lambda i: i.forge(exp=int(time.time()) - 300), "expired"),
    "not yet valid": (lambda i: i.forge(nbf=int(time.time()) + 600), "not valid yet"),
    "wrong audience": (
        lambda i: i.token("alice", resource="http://elsewhere.test/mcp"),
        "audience must be",
    ),
    "wrong issuer": (lambda i: i.forge(iss="http://evil.test"), "not from this issuer"),
    "alg none": (lambda i: _unsigned(i.forge()), "'none'"),
    "HMAC with the public key": (lambda i: _hmac_forgery(i), "'HS256'"),
    "tampered": (lambda i: _tamper(i.token("carol")), "altered"),
    "unknown kid": (
        lambda i: i.forge(keys=signing_keys("rotated-away"), kid="rotated-away"),
        "unknown kid",
    ),
    "another IdP's": (
        lambda i: i.forge(
            keys=signing_keys("their-key"), kid="their-key", iss="http://other-idp.test"
        ),
        "unknown kid",
    ),
    "revoked (opaque)": (_revoked, "not active"),
    "garbage": (lambda i: "x" * 40, "not active"),
}


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(token: str) -> str:
    return (
        f"{_b64(json.dumps({'alg': 'none', 'kid': 'idp-es256'}).encode())}.{token.split('.')[1]}."
    )


def _hmac_forgery(idp: IdentityProvider) -> str:
    from joserfc.jwk import KeySet

    public = json.dumps(idp.keys.keys[0].as_dict(private=False)).encode()
    secret = KeySet.import_key_set(
        {"keys": [{"kty": "oct", "kid": "idp-es256", "k": _b64(public)}]}
    )
    return idp.forge(keys=secret, alg="HS256")


def _tamper(token: str) -> str:
    header, body, signature = token.split(".")
    claims = json.loads(__import__("base64").urlsafe_b64decode(body + "==="))
    claims["groups"] = ["admins"]
    return f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"


def test_each_bad_token_is_refused_with_a_reason_and_the_table_is_kept(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    rows, failures = [], []
    with rest(stack) as client:
        for case, (make, reason) in REFUSALS.items():
            token = make(idp)
            answer = client.get("/v1/executions", headers=bearer(token))
            message = (
                answer.json()["error"]["message"] if answer.status_code == 401 else answer.text
            )
            rows.append(f"| {case} | 401 | {answer.status_code}: {message} |")
            if answer.status_code != 401 or reason not in message or token in answer.text:
                failures.append((case, answer.status_code, message))
            assert 'error="invalid_token"' in answer.headers.get("www-authenticate", ""), case
    OUT.mkdir(exist_ok=True)
    (OUT / "refusals.md").write_text("| token | expected | observed |\n|---|---|---|\n"
                                     + "\n".join(rows) + "\n")  # fmt: skip
    assert not failures, failures


def test_a_dpop_bound_token_needs_its_proof(stack: E2EStack, idp: IdentityProvider) -> None:
    key = ECKey.generate_key("P-256")
    token = idp.token("alice", dpop=key)
    url = f"{PUBLIC_URL}/v1/executions"
    with rest(stack) as client:
        plain = client.get("/v1/executions", headers=bearer(token))
        assert plain.status_code == 401 and "DPoP-bound" in plain.json()["error"]["message"]
        proof = dpop_proof(key, "GET", url, token=token)
        headers = {"Authorization": f"DPoP {token}", "DPoP": proof}
        assert client.get("/v1/executions", headers=headers).status_code == 200
        replayed = client.get("/v1/executions", headers=headers)
        assert replayed.status_code == 401 and "used before" in replayed.json()["error"]["message"]
        other = dpop_proof(ECKey.generate_key("P-256"), "GET", url, token=token)
        stolen = client.get(
            "/v1/executions", headers={"Authorization": f"DPoP {token}", "DPoP": other}
        )
        assert stolen.status_code == 401 and "another key" in stolen.json()["error"]["message"]


class DPoPAuth(httpx2.Auth):
    """A DPoP-bound token sent with a fresh proof on every request (RFC 9449), its ``htu`` the
    gateway's public URL whichever replica the request reaches."""

    def __init__(self, key: ECKey, token: str) -> None:
        self.key, self.token = key, token

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        proof = dpop_proof(
            self.key, request.method, PUBLIC_URL + request.url.path, token=self.token
        )
        request.headers["Authorization"] = f"DPoP {self.token}"
        request.headers["DPoP"] = proof
        yield request


async def test_a_dpop_bound_session_is_served_by_another_replica(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    """Two replicas behind a round-robin balancer: a 2025-11-25 session opened with a
    DPoP-bound token on one is served on the other (forwarded to its holder); each proof is
    checked once, where it arrived, and a replayed one is refused on both replicas."""
    port = free_port()
    second = stack.start("gateway-2", [sys.executable, "-m", "services.gateway"],
                         extra_env={"AGENTCARDS_GATEWAY_PORT": str(port)})  # fmt: skip
    try:
        wait_until(lambda: _healthy(port), what="the second replica healthy", proc=second)
        answers = await _dpop_through_two_replicas(
            idp, [f"127.0.0.1:{GATEWAY_PORT}", f"127.0.0.1:{port}"]
        )
    finally:
        second.stop()
    assert answers == [[200, 401, 401], [200, 401, 401]]
    with connect(stack.settings.database_url or "") as conn:
        row = conn.execute(
            "SELECT user_id, tenant_id, status FROM executions ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    assert row == {"user_id": "alice", "tenant_id": "acme", "status": "succeeded"}


async def _dpop_through_two_replicas(idp: IdentityProvider, replicas: list[str]) -> list[list[int]]:
    """The session's steps through the balancer, then one proof sent three times in each
    order of the replicas: the statuses of each order."""
    key = ECKey.generate_key("P-256")
    token = idp.token("alice", dpop=key)
    sessions: set[str] = set()

    async def note_session(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            sessions.add(response.headers["mcp-session-id"])

    with RoundRobin(replicas, "request").running() as balancer:
        async with (
            create_mcp_http_client(auth=DPoPAuth(key, token)) as http,
            streamable_http_client(f"{balancer.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            http.event_hooks["response"].append(note_session)
            assert (await session.initialize()).protocol_version == "2025-11-25"
            listed = await session.list_tools()
            result = await session.call_tool("execute_code", {"code": "return 6 * 7"})
            (session_id,) = sessions
            assert "execute_code" in {tool.name for tool in listed.tools}
            assert not result.is_error and "42" in str(result.content), result.content
            assert set(balancer.chosen) == set(replicas)  # both replicas served the session
            # A proof sent to one replica, then again to the other and to the first: accepted
            # once, a replay everywhere after. One of the two orders starts at the replica that
            # does not hold the session (its request is forwarded).
            ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
            answers: list[list[int]] = []
            async with httpx.AsyncClient(timeout=30) as raw:
                for first, other in (replicas, replicas[::-1]):
                    headers = {"Authorization": f"DPoP {token}",
                               "DPoP": dpop_proof(key, "POST", RESOURCE, token=token),
                               "Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-11-25",
                               "Accept": "application/json, text/event-stream"}  # fmt: skip
                    sent = [await raw.post(f"http://{to}/mcp", json=ping, headers=headers)
                            for to in (first, other, first)]  # fmt: skip
                    answers.append([answer.status_code for answer in sent])
                    assert all("used before" in answer.text for answer in sent[1:])
    return answers


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_scopes_and_groups_limit_people_on_both_surfaces(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    carol, dave = idp.token("carol"), idp.token("dave")  # readers; a group nobody mapped
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": NOW_CODE}}}  # fmt: skip
    mcp_headers = {"Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    with rest(stack) as client:
        assert client.get("/v1/executions", headers=bearer(carol)).status_code == 200
        for refused in (
            client.post("/v1/executions", headers=bearer(carol), json={"code": NOW_CODE}),
            client.post("/mcp", headers=bearer(carol) | mcp_headers, json=call),
        ):
            assert refused.status_code == 403, refused.text
            challenge = refused.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge
            assert 'scope="agentcards:execute"' in challenge
        nobody = client.get("/v1/executions", headers=bearer(dave))
        assert nobody.status_code == 403 and "agentcards:read" in nobody.text
        admin_only = client.get("/v1/audit", headers=bearer(idp.token("alice")))
        assert admin_only.status_code == 403 and "agentcards:admin" in admin_only.text
        assert client.get("/v1/audit", headers=bearer(idp.token("erin"))).status_code == 200
        # alice's groups allow time:* only: a tool of another server is refused, as for a key.
        outside = client.post("/v1/executions", headers=bearer(idp.token("alice")),
                              json={"code": NOW_CODE, "tools": ["example:add"]})  # fmt: skip
        assert outside.status_code in {400, 403, 422}, outside.text


def test_people_of_two_organisations_do_not_see_each_other(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    alice, bob = bearer(idp.token("alice")), bearer(idp.token("bob"))  # acme, globex
    with rest(stack) as client:
        ran = client.post("/v1/executions", params={"wait": "true"}, headers=alice,
                          json={"code": NOW_CODE})  # fmt: skip
        assert ran.status_code in {200, 201}, ran.text
        run = ran.json()
        assert run["status"] == "succeeded" and run["user_id"] == "alice"
        assert client.get(f"/v1/executions/{run['id']}", headers=bob).status_code == 404
        theirs = client.get("/v1/executions", headers=bob).json()["executions"]
        assert run["id"] not in {e["id"] for e in theirs}
        mine = client.get("/v1/executions", params={"user": "alice"}, headers=alice).json()
        assert run["id"] in {e["id"] for e in mine["executions"]}
        assert {e["user_id"] for e in mine["executions"]} == {"alice"}


def test_keys_keep_working_beside_tokens_and_never_mix(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    with connect(stack.settings.database_url or "") as conn:
        _, key = issue_key(conn, tenant_id="acme")
        conn.commit()
    with rest(stack) as client:
        assert client.get("/v1/executions", headers=bearer(key)).status_code == 200
        proof = dpop_proof(ECKey.generate_key("P-256"), "GET", f"{PUBLIC_URL}/v1/executions")
        mixed = client.get("/v1/executions", headers=bearer(key) | {"DPoP": proof})
        assert mixed.status_code == 401 and "one credential" in mixed.json()["error"]["message"]


async def test_no_token_is_kept_in_plain_text(stack: E2EStack, idp: IdentityProvider) -> None:
    """After code mode and a direct call with a person's token: not in Redis (any key or value
    of any type), not in a pg_dump of the whole database, not in any process's log."""
    token = idp.token("alice")
    with rest(stack) as client:
        client.post("/v1/executions", params={"wait": "true"}, headers=bearer(token),
                    json={"code": NOW_CODE})  # fmt: skip
    async with (
        create_mcp_http_client(headers=bearer(token)) as http,
        Client(streamable_http_client(f"{stack.gateway_url}/mcp/servers/time", http_client=http),
               mode="legacy") as mcp,  # type: ignore[arg-type]
    ):  # fmt: skip
        assert not (await mcp.call_tool("get_current_time", {"timezone": "UTC"})).is_error
    time.sleep(1)  # the direct call's rows are written just after its answer
    needle = token[-40:].encode()
    client_redis = redis.Redis.from_url(stack.settings.redis_url or "")
    for name in client_redis.scan_iter(count=1000):
        assert needle not in name
        assert needle not in redis_value(client_redis, name), name
    dump = subprocess.run(
        [str(Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"),
         "--data-only", stack.settings.database_url or ""],
        capture_output=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert b"COPY public.executions" in dump and needle not in dump
    for proc in stack.procs.values():
        assert token[-40:] not in proc.log_path.read_text(errors="replace")


async def test_a_direct_call_is_recorded_against_the_person(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    """A direct call (no sandbox: its rows are written just after the answer) names its caller
    on the execution and its audit row, as code mode does."""
    headers = bearer(idp.token("alice"))
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(f"{stack.gateway_url}/mcp/servers/time", http_client=http),
               mode="legacy") as client,  # type: ignore[arg-type]
    ):  # fmt: skip
        result = await client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
    assert not result.is_error, result.content
    deadline = time.monotonic() + 30
    row = None
    while row is None and time.monotonic() < deadline:
        with connect(stack.settings.database_url or "") as conn:
            row = conn.execute(
                "SELECT e.user_id, e.tenant_id, a.user_id AS audited FROM executions e "
                "JOIN audit_log a ON a.execution_id = e.id WHERE e.tools = %s::jsonb",
                ('["time:get_current_time"]',),
            ).fetchone()
        time.sleep(0.2)
    assert row == {"user_id": "alice", "tenant_id": "acme", "audited": "alice"}


def test_connect_writes_an_entry_that_signs_in_with_oauth(
    stack: E2EStack, idp: IdentityProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentcards connect cursor` on a stack where people sign in: the entry is the URL alone
    (no key made, nothing secret written), `--check` follows the discovery to this provider,
    and the SDK's OAuth client signs in from that URL and lists the tools."""
    for name, value in settings_to_env(stack.settings).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path))
    get_settings.cache_clear()
    cli = CliRunner()
    path = CLIENTS["cursor"].path(Platform.current())
    with connect(stack.settings.database_url or "") as conn:
        keys_before = conn.execute("SELECT count(*) AS n FROM api_keys").fetchone()
    try:
        written = cli.invoke(app, ["connect", "cursor"])
        assert written.exit_code == 0, written.output
        assert f"signs in with OAuth at {ISSUER}" in written.output, written.output
        entry = parse_as_client("cursor", path.read_text())["mcpServers"]["agentcards"]
        assert entry == {"url": RESOURCE}  # nothing secret: the client discovers the rest
        checked = cli.invoke(app, ["connect", "cursor", "--check"])
        assert checked.exit_code == 0, checked.output
        assert f"OAuth, the client signs in at {ISSUER}" in checked.output, checked.output
        removed = cli.invoke(app, ["disconnect", "cursor"])
        assert removed.exit_code == 0, removed.output
        assert "agentcards" not in parse_as_client("cursor", path.read_text())["mcpServers"]
    finally:
        get_settings.cache_clear()
    with connect(stack.settings.database_url or "") as conn:
        assert conn.execute("SELECT count(*) AS n FROM api_keys").fetchone() == keys_before

    async def sign_in_and_list() -> list[str]:
        auth = signing_in(idp, entry["url"], [])
        async with (
            create_mcp_http_client(auth=auth) as http,
            Client(streamable_http_client(entry["url"], http_client=http)) as client,
        ):
            return [tool.name for tool in (await client.list_tools()).tools]

    assert "execute_code" in anyio.run(sign_in_and_list)
