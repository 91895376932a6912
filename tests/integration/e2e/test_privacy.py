"""Privacy by default on the real stack (docs/privacy.md): a CRM server's personal data and
secrets reach the agent code as they are and leave the run only as tokens; a token passed
back reaches a tool as the real value, for its own tenant only; nothing at rest holds a
planted value."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from shared.auth.store import issue_key
from shared.privacy.detect import TOKEN_PATTERN
from shared.queues import events_log_key
from tests.harness import stop_all
from tests.integration.pii_server import CUSTOMERS, PLANTED
from tests.stack import REPO, E2EStack, stack_fixture

MB = 1 << 20


def crm_server(tmp: Path, **agentcards: Any) -> dict[str, Any]:
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.integration.pii_server"],
        "env": {"PII_TEST_DIR": str(tmp / "crm")},
        "cwd": str(REPO),
    }
    return entry | ({"agentcards": agentcards} if agentcards else {})


pii_stack = stack_fixture(
    lambda tmp: {
        "crm": crm_server(tmp),
        # The operator's opt-outs: a server whose data is public, one tokenising e-mail only.
        "public": crm_server(tmp, pii="off"),
        "partial": crm_server(tmp, pii={"kinds": ["EMAIL"], "tools": {"export": "off"}}),
    },
    learning=False,
    sandbox_tool_result_bytes=12 * MB,
    sandbox_result_bytes=12 * MB,
)


class Tenant:
    def __init__(self, stack: E2EStack, key: str) -> None:
        self.stack, self.headers = stack, {"Authorization": f"Bearer {key}"}

    def run(self, code: str, **body: Any) -> dict[str, Any]:
        with httpx.Client(base_url=self.stack.gateway_url, headers=self.headers, timeout=120) as c:
            response = c.post(
                "/v1/executions", params={"wait": "true"}, json={"code": code, **body}
            )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def get(self, execution_id: str) -> str:
        with httpx.Client(base_url=self.stack.gateway_url, headers=self.headers, timeout=60) as c:
            return c.get(f"/v1/executions/{execution_id}").text

    def resolve(self, tokens: list[str]) -> httpx.Response:
        with httpx.Client(base_url=self.stack.gateway_url, headers=self.headers, timeout=60) as c:
            return c.post("/v1/pii/resolve", json={"tokens": tokens})

    async def mcp_view(self, execution_id: str) -> str:
        async with (
            create_mcp_http_client(headers=self.headers) as http,
            streamable_http_client(f"{self.stack.gateway_url}/mcp", http_client=http) as (r, w),
            ClientSession(r, w) as session,
        ):
            await session.initialize()
            result = await session.call_tool("get_execution", {"execution_id": execution_id})
        return json.dumps(result.structured_content)


@pytest.fixture(scope="module")
def tenants(pii_stack: E2EStack) -> Iterator[tuple[Tenant, Tenant, Tenant]]:
    with pii_stack.db() as conn:
        _, acme = issue_key(conn, tenant_id="acme")
        _, globex = issue_key(conn, tenant_id="globex")
        _, reviewer = issue_key(conn, tenant_id="acme", admin=True)
    yield Tenant(pii_stack, acme), Tenant(pii_stack, globex), Tenant(pii_stack, reviewer)


def received(stack: E2EStack) -> list[str]:
    path = stack.tmp / "crm" / "received"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def leaks(text: str) -> list[str]:
    return [value for value in PLANTED if value in text]


READ_AND_USE = """
rows = await mcp.crm.customers()
domains = sorted({r['email'].split('@')[1] for r in rows})  # real values inside
print('first customer:', rows[0]['email'], rows[0]['phone'])
progress(f"read {rows[0]['email']}", 1, 2)
await mcp.crm.sync_customers()
return {'customers': rows, 'domains': domains}
"""


async def test_what_leaves_a_run_holds_tokens_and_tokens_come_back_as_values(
    pii_stack: E2EStack, tenants: tuple[Tenant, Tenant, Tenant]
) -> None:
    acme, globex, reviewer = tenants
    run = acme.run(READ_AND_USE, intent="list customers")
    assert run["status"] == "succeeded", run
    customers = run["result"]["customers"]
    # The code saw real values (it split the real e-mail), the caller sees tokens.
    assert run["result"]["domains"] == ["acme-customers.example"]
    assert customers[0]["name"] == "Jane Doe" and customers[0]["id"] == "CUST-000042"
    assert customers[0]["created"] == "2024-01-15T10:30:00Z"
    assert customers[0]["balance"] == "$1,299.99"
    kinds = {f: TOKEN_PATTERN.fullmatch(customers[0][f]) for f in
             ("email", "phone", "card", "iban", "ssn", "api_key")}  # fmt: skip
    assert {f: m.group(1) if m else None for f, m in kinds.items()} == {
        "email": "EMAIL", "phone": "PHONE", "card": "CARD",
        "iban": "IBAN", "ssn": "SSN", "api_key": "SECRET",
    }  # fmt: skip
    email_token = customers[0]["email"]
    assert f"first customer: {email_token} {customers[0]['phone']}" in run["stdout"]
    produced = {p["token"]: p for p in run["pii"]["produced"]}
    assert produced[email_token]["kind"] == "EMAIL"
    assert produced[email_token]["tool"] == "crm:customers"
    # Every view of it: REST, MCP, the events SSE replays (progress of the code and of the server).
    assert leaks(json.dumps(run)) == []
    assert leaks(acme.get(run["id"])) == []
    assert leaks(await acme.mcp_view(run["id"])) == []
    client = redis.Redis.from_url(pii_stack.settings.redis_url or "")
    events = [json.loads(e) for e in client.lrange(events_log_key(run["id"]), 0, -1)]
    messages = [e.get("message") for e in events if e["type"] in ("progress", "tool_progress")]
    assert f"read {email_token}" in messages
    assert f"syncing {email_token}" in messages
    assert leaks(json.dumps(events)) == []

    # A token passed back: as an argument, and as a literal in the code.
    by_args = acme.run("return await mcp.crm.record(value=args['v'])", args={"v": email_token})
    literal = acme.run(f"return await mcp.crm.record(value='mail: {customers[1]['card']}')")
    assert by_args["status"] == literal["status"] == "succeeded"
    assert received(pii_stack)[-2:] == [CUSTOMERS[0]["email"], f"mail: {CUSTOMERS[1]['card']}"]
    assert by_args["pii"] is None  # every token resolved, nothing new produced
    # A tool that fails naming the value fails with the token.
    missing = acme.run("return await mcp.crm.customer_by_email(email='nobody@nowhere.example')")
    assert missing["status"] == "failed"
    assert "\u27e8EMAIL_" in missing["error"]["message"]
    found = acme.run("return (await mcp.crm.customer_by_email(email=args['e']))['id']",
                     args={"e": email_token})  # fmt: skip
    assert found["result"] == "CUST-000042", found

    # Another tenant's token, and a made-up one, reach the tool as they are.
    made_up = "\u27e8EMAIL_0123456789abcdef\u27e9"
    other = globex.run("return await mcp.crm.record(value=args['v'])", args={"v": email_token})
    fake = acme.run("return await mcp.crm.record(value=args['v'])", args={"v": made_up})
    assert received(pii_stack)[-2:] == [email_token, made_up]
    assert other["pii"]["unresolved"] == [email_token]
    assert fake["pii"]["unresolved"] == [made_up]
    # The same value is another token in another tenant.
    theirs = globex.run("return (await mcp.crm.customers())[0]['email']")
    assert TOKEN_PATTERN.fullmatch(theirs["result"]) and theirs["result"] != email_token

    # Only an admin key resolves a token explicitly, for its own tenant, and it is audited.
    assert acme.resolve([email_token]).status_code == 403
    answer = reviewer.resolve([email_token, made_up]).json()
    assert answer == {"values": {email_token: CUSTOMERS[0]["email"]}, "unresolved": [made_up]}
    with pii_stack.db() as conn:
        audit = conn.execute(
            "SELECT details FROM audit_log WHERE action = 'pii_resolve'"
        ).fetchall()
    assert [a["details"] for a in audit] == [{"tokens": [email_token, made_up], "resolved": 1}]

    # A 10 MB result comes back tokenised, without crash.
    big = acme.run("return (await mcp.crm.export(megabytes=1)) * 10", timeout_s=120)
    assert big["status"] == "succeeded", big.get("error")
    assert len(big["result"]) > 9 * MB and email_token in big["result"]

    # At rest: every row of every table in Postgres, every key of Redis.
    with pii_stack.db() as conn:
        tables = [r["tablename"] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]  # fmt: skip
        dump = "\n".join(
            str(r["row"]) for t in tables
            for r in conn.execute(f'SELECT t::text AS row FROM "{t}" t').fetchall()
        )  # fmt: skip
    assert "crm:customers" in dump and email_token in dump  # the scan reads what it should
    assert leaks(dump) == []
    # And pg_dump of the whole database (every schema, not only the public tables' rows).
    # Imported here: pgserver reads XDG_RUNTIME_DIR at import, which the session's
    # Postgres fixture sets (tests/conftest.py, deploy/launcher/embedded.py).
    from pgserver._commands import POSTGRES_BIN_PATH

    pg_dump = subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), pii_stack.settings.database_url or ""],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pg_dump.returncode == 0, pg_dump.stderr[-3000:]
    assert "pii_vault" in pg_dump.stdout and email_token in pg_dump.stdout
    assert leaks(pg_dump.stdout) == []
    assert leaks(_redis_dump(client)) == []

    # Opt-outs in the servers' `agentcards` blocks (after the scan: these store values).
    public = acme.run("return (await mcp.public.customers())[0]")
    assert public["result"] == CUSTOMERS[0] and public["pii"] is None
    partial = acme.run("return (await mcp.partial.customers())[0]")["result"]
    assert TOKEN_PATTERN.fullmatch(partial["email"])
    assert partial["phone"] == CUSTOMERS[0]["phone"] and partial["card"] == CUSTOMERS[0]["card"]

    # Every log of the stack (the recorder's own file holds what the tool received: real values).
    stop_all(pii_stack.procs.values())  # flush and close every log first
    logs = [p for p in pii_stack.tmp.rglob("*.log") if p.is_file()]
    assert len(logs) >= 3  # the scan reads what it should: gateway, toolhost, worker
    assert {str(p): leaks(p.read_bytes().decode("utf-8", "replace")) for p in logs} == {
        str(p): [] for p in logs
    }


def _redis_dump(client: redis.Redis) -> str:
    parts: list[str] = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        value: Any
        if kind == "string":
            value = client.get(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = kind
        parts.append(f"{key!r} {value!r}")
    return "\n".join(parts)
