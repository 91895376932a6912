"""A key created with ``agentcards keys create --pii off`` (a trusted back-office key) gets
values in clear; a normal key of the same tenant on the same stack still gets tokens, and
never a result the opted-out key's run left in the result cache; creating the key is
audited (docs/privacy.md, "Control")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import redis

from shared.privacy.detect import TOKEN_PATTERN
from shared.queues import events_log_key
from tests.integration.e2e.test_privacy import Tenant, crm_server
from tests.integration.pii_server import CUSTOMERS
from tests.stack import REPO, E2EStack, stack_fixture

# The CRM's results are cached: the cache must not carry values between the two keys.
opt_out_stack = stack_fixture(
    lambda tmp: {"crm": crm_server(tmp, cache={"read_only": True, "ttl_s": 300})}, learning=False
)

READ = """
rows = await mcp.crm.customers()
progress(f"read {rows[0]['email']}", 1, 1)
await mcp.crm.sync_customers()
return rows[0]
"""


def _keys(stack: E2EStack, *args: str) -> str:
    """``agentcards keys …`` against the stack's database: its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env |= {"AGENTCARDS_DATABASE_URL": stack.settings.database_url or "", "COLUMNS": "250"}
    done = subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "keys", *args],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _create_key(stack: E2EStack, *args: str) -> tuple[str, str]:
    """``agentcards keys create`` for tenant acme: (key id, key)."""
    out = _keys(stack, "create", "--tenant", "acme", *args)
    key_id = re.findall(r"key id\s+(\S+)", out)[0]
    key = next(line for line in out.splitlines() if line.startswith("ack_"))
    return key_id, key


def test_an_opted_out_key_gets_values_a_normal_key_tokens(opt_out_stack: E2EStack) -> None:
    normal_id, normal_key = _create_key(opt_out_stack, "--name", "agents")
    backoffice_id, backoffice_key = _create_key(
        opt_out_stack, "--name", "back-office", "--pii", "off"
    )
    normal, backoffice = Tenant(opt_out_stack, normal_key), Tenant(opt_out_stack, backoffice_key)

    # The normal key first: its run is in the result cache when the opted-out key asks.
    tokens = normal.run(READ)
    assert tokens["status"] == "succeeded", tokens
    for field in ("email", "phone", "card", "iban", "ssn", "api_key"):
        assert TOKEN_PATTERN.fullmatch(tokens["result"][field]), tokens["result"]

    clear = backoffice.run(READ)
    assert clear["status"] == "succeeded", clear
    assert clear["result"] == CUSTOMERS[0]  # the planted values, as the tool returned them
    assert clear["pii"] is None
    assert clear["cache_hit"] is None  # not the normal key's cached (tokenised) result
    client = redis.Redis.from_url(opt_out_stack.settings.redis_url or "")
    events = [json.loads(e) for e in client.lrange(events_log_key(clear["id"]), 0, -1)]
    # The code's progress and the server's own (the toolhost's tool_progress) alike.
    messages = [e.get("message") for e in events]
    assert f"read {CUSTOMERS[0]['email']}" in messages
    assert f"syncing {CUSTOMERS[0]['email']}" in messages

    # The normal key again, after the opted-out run: its own cached tokens; the clear run
    # left no entry behind (it would have replaced this one).
    again = normal.run(READ)
    assert again["status"] == "succeeded", again
    assert again["cache_hit"] == "execution" and again["source_execution_id"] == tokens["id"]
    assert TOKEN_PATTERN.fullmatch(again["result"]["email"]), again["result"]
    assert CUSTOMERS[0]["email"] not in json.dumps(again)

    # Creating the opted-out key is audited; so is the normal one, saying it tokenises.
    with opt_out_stack.db() as conn:
        audit = {
            str(r["key_id"]): r["details"]
            for r in conn.execute(
                "SELECT key_id, details FROM audit_log WHERE action = 'key_create'"
            ).fetchall()
        }
        stored = {
            str(r["id"]): r["pii"] for r in conn.execute("SELECT id, pii FROM api_keys").fetchall()
        }
    assert audit[backoffice_id]["pii"] == "off" and audit[backoffice_id]["name"] == "back-office"
    assert audit[normal_id]["pii"] == "tokenize"
    assert stored == {normal_id: "tokenize", backoffice_id: "off"}
    listed = _keys(opt_out_stack, "list").splitlines()
    assert any(backoffice_id in line and " off " in line for line in listed), listed
    assert any(normal_id in line and " tokenize " in line for line in listed), listed
