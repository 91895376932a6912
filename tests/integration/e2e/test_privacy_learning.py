"""Privacy where learning and the wire's limits meet it (docs/privacy.md):
a capability learned from a run over personal data holds no value (the code, intent and
schema it stores never held one; its runs' outputs are tokens), and runs again with tokens
as its arguments, the tool getting the real values; a result nested to the wire's depth
limit comes back tokenised, one level deeper is refused naming no value."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from shared.auth.store import issue_key
from shared.privacy.detect import TOKEN_PATTERN
from shared.sandbox.child.wire import MAX_DEPTH
from tests.integration.e2e.test_privacy import Tenant, crm_server, leaks
from tests.integration.pii_server import CUSTOMERS
from tests.stack import E2EStack, stack_fixture

learning_stack = stack_fixture(lambda tmp: {"crm": crm_server(tmp)})  # with the learning worker


@pytest.fixture(scope="module")
def acme(learning_stack: E2EStack) -> Iterator[Tenant]:
    with learning_stack.db() as conn:
        _, key = issue_key(conn, tenant_id="acme")
    yield Tenant(learning_stack, key)


LOOK_UP = "return await mcp.crm.customer_by_email(email=args['email'])"


def test_a_capability_learned_over_personal_data_reruns_with_tokens(
    learning_stack: E2EStack, acme: Tenant
) -> None:
    emails = acme.run("return [c['email'] for c in await mcp.crm.customers()]")["result"]
    assert all(TOKEN_PATTERN.fullmatch(e) for e in emails), emails
    first = acme.run(LOOK_UP, intent="look a customer up by e-mail", args={"email": emails[0]})
    assert first["status"] == "succeeded" and first["capability"], first
    assert first["result"]["id"] == CUSTOMERS[0]["id"]  # the tool got the real e-mail
    assert TOKEN_PATTERN.fullmatch(first["result"]["email"]) and leaks(json.dumps(first)) == []
    capability_id = first["capability"]["id"]
    with learning_stack.db() as conn:
        stored = conn.execute(
            "SELECT c::text AS row FROM capabilities c WHERE id = %s", (capability_id,)
        ).fetchone()
    assert stored is not None and leaks(str(stored["row"])) == []

    # Run again with the other customer's token: the tool gets that customer's real e-mail.
    with httpx.Client(base_url=learning_stack.gateway_url, headers=acme.headers, timeout=120) as c:
        response = c.post(
            f"/v1/capabilities/{capability_id}/execute",
            params={"wait": "true"},
            json={"args": {"email": emails[1]}},
        )
    assert response.status_code == 200, response.text
    rerun = response.json()
    assert rerun["status"] == "succeeded", rerun
    assert rerun["result"]["id"] == CUSTOMERS[1]["id"]
    assert TOKEN_PATTERN.fullmatch(rerun["result"]["email"]) and leaks(json.dumps(rerun)) == []
    assert rerun["pii"] is None or rerun["pii"]["unresolved"] == []


def test_a_result_nested_to_the_wires_limit_is_tokenised(acme: Tenant) -> None:
    # The run's value is depth 1: a string inside n lists is at depth n + 1.
    code = """
x = (await mcp.crm.customers())[0]['email']
for _ in range(args['n']):
    x = [x]
return x
"""
    at_limit = acme.run(code, args={"n": MAX_DEPTH - 1})
    assert at_limit["status"] == "succeeded", at_limit.get("error")
    node, levels = at_limit["result"], 0
    while isinstance(node, list):
        node, levels = node[0], levels + 1
    assert levels == MAX_DEPTH - 1 and TOKEN_PATTERN.fullmatch(node), node
    too_deep = acme.run(code, args={"n": MAX_DEPTH})
    assert too_deep["status"] == "failed" and too_deep["error"]["type"] == "output_limit"
    assert leaks(json.dumps(too_deep)) == [] and leaks(json.dumps(at_limit)) == []
