"""A server behind the gateway that acts for people (``"auth": {"type": "token-exchange"}``):
each person's calls reach it with a token exchanged for theirs at the gateway's identity
provider (npm `oidc-provider` with an RFC 8693 grant), never their own token and never
anyone else's; a key's calls are refused ``authorization_required``; no token is kept in
plain text.

Its own stack: the gateway's settings name its own identity provider and public URL (fixed
ports), and the upstream server's URL is fixed before the stack starts.
"""

from __future__ import annotations

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
import pytest
import redis

from tests.harness import spawn, stop_group, wait_until
from tests.integration.identity.provider import (
    IdentityProvider,
    free_port,
    gateway_options,
    redis_value,
    running_provider,
)
from tests.stack import REPO, E2EStack, stack_fixture

IDP_PORT, GATEWAY_PORT, UPSTREAM_PORT = free_port(), free_port(), free_port()
ISSUER = f"http://127.0.0.1:{IDP_PORT}"
PUBLIC_URL = f"http://127.0.0.1:{GATEWAY_PORT}"
AUDIENCE = f"http://127.0.0.1:{UPSTREAM_PORT}/mcp"
UPSTREAM = {"url": AUDIENCE,
            "auth": {"type": "token-exchange", "audience": AUDIENCE, "scopes": ["upstream:read"]}}  # fmt: skip
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "groups": {
        "engineers": {"tools": ["upstream:*"], "scopes": ["agentcards:read", "agentcards:execute"]},
    },
}
OUT = Path(tempfile.gettempdir()) / "agentcards-upstream-identity"  # the two-people table
WHOAMI = """
try:
    return await mcp.upstream.whoami()
except ToolCallError as e:
    return {"error": e.type, "message": str(e)}
"""

stack = stack_fixture(
    lambda tmp: {"upstream": UPSTREAM},
    learning=False,
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT),
)


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """Started before the stack: the toolhost reads the server's tools with the gateway's
    client at once."""
    tmp = tmp_path_factory.mktemp("upstream-idp")
    with running_provider(tmp, port=IDP_PORT, resource=f"{PUBLIC_URL}/mcp") as provider:
        yield provider


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, idp: IdentityProvider) -> Iterator[Path]:
    """The upstream server, running; yields the file listing every token it was shown."""
    log = tmp_path_factory.mktemp("upstream") / "seen.jsonl"
    log.touch()
    argv = [sys.executable, "-m", "tests.integration.identity.upstream_server",
            str(UPSTREAM_PORT), ISSUER, AUDIENCE, str(log)]  # fmt: skip
    proc = spawn(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers() -> bool:
        try:
            return httpx.get(AUDIENCE, timeout=2).status_code == 401
        except httpx.TransportError:
            return proc.poll() is not None

    try:
        wait_until(answers, what="the upstream server", timeout_s=30)
        assert proc.poll() is None, "tests.integration.identity.upstream_server exited"
        yield log
    finally:
        stop_group(proc)


def run(client: httpx.Client, headers: dict[str, str], code: str) -> Any:
    ran = client.post("/v1/executions", params={"wait": "true"}, headers=headers,
                      json={"code": code, "timeout_s": 60})  # fmt: skip
    assert ran.status_code in {200, 201}, ran.text
    body = ran.json()
    assert body["status"] == "succeeded", body
    return body["result"]


def test_each_person_reaches_the_server_as_themselves(
    idp: IdentityProvider, seen: Path, stack: E2EStack
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
    time.sleep(1)  # the runs' last rows are written just after their answers
    needles = [t[-40:].encode() for t in {s["token"] for s in shown} | set(people.values())]
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
