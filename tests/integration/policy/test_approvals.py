"""A permit annotated @approval("required") pauses the call on the real stack: the run shows
``waiting_approval`` with the call, nothing reaches the server until a person answers over
REST; approved it runs exactly once (two answers at once: one wins), denied it raises
``approval_denied``, unanswered ``approval_timeout``; the wait does not spend the run's
wall-clock limit (up to the cap) nor its place in the sandbox worker; a call whose run
ended or whose direct caller went away closes its approval; who may answer follows ``@approvers`` (OAuth groups) or, without it, the
tenant's admins other than the caller; answers are in the trace and the audit log; a
capability learned from a run whose call was approved says so in search and its skill.

The policy stack of test_decisions.py (shared: the same servers and options).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import threading
from typing import Any

import httpx
import psutil
import pytest
import redis
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST

from shared.auth.store import issue_key
from shared.embeddings import get_embedder
from shared.executions.liveness import read_sandbox_beats
from shared.learning.ingest import ingest_executions
from shared.recovery.reaper import _candidates
from tests.harness import wait_until
from tests.integration.identity.provider import IdentityProvider, free_port
from tests.integration.mcp_tasks_client import LegacySession
from tests.integration.policy import test_decisions as decisions
from tests.integration.scale.test_gateway_replicas import INIT
from tests.stack import E2EStack, each_event, mcp_session, tool_error

# The policy stack and its identity provider, shared with test_decisions.py.
stack, idp, recorded = decisions.stack, decisions.idp, decisions.recorded
direct_session = decisions.direct_session

PYTHON = """
try:
    return await mcp.rec.pay(amount=args["amount"], to=args["to"])
except ToolCallError as e:
    return [e.type, e.policies, e.message]
"""
REFUND_INTENT = "refund a customer's payment"
TYPESCRIPT = """
try { return await mcp.rec.pay({ amount: args.amount, to: args.to }); }
catch (e) { return [e.type, e.policies, e.message]; }
"""


def key(stack: E2EStack, name: str, *, admin: bool = False) -> dict[str, str]:
    with stack.db() as conn:
        _, secret = issue_key(conn, tenant_id="acme", name=name, admin=admin)
    return {"Authorization": f"Bearer {secret}"}


def submit(stack: E2EStack, headers: dict[str, str], code: str, **body: Any) -> str:
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
        made = client.post("/v1/executions", json={"code": code, **body})
    assert made.status_code in (200, 202), made.text
    execution_id: str = made.json()["id"]
    return execution_id


def read(stack: E2EStack, headers: dict[str, str], execution_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
        got = client.get(f"/v1/executions/{execution_id}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def paused(stack: E2EStack, headers: dict[str, str], execution_id: str) -> dict[str, Any]:
    """The run once it shows its call waiting for approval."""
    seen: dict[str, Any] = {}

    def waiting() -> bool:
        seen.update(read(stack, headers, execution_id))
        return seen["status"] == "waiting_approval"

    wait_until(waiting, what="the run waits for approval", timeout_s=60)
    return seen


def finished(stack: E2EStack, headers: dict[str, str], execution_id: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.update(read(stack, headers, execution_id))
        return seen["status"] in ("succeeded", "failed", "timeout", "worker_lost")

    wait_until(done, what="the run ends", timeout_s=90)
    return seen


def answer(
    stack: E2EStack | str, headers: dict[str, str], execution_id: str, call_id: str, body: Any
) -> httpx.Response:
    """An answer given to the stack's gateway (or to the gateway at this URL)."""
    url = stack if isinstance(stack, str) else stack.gateway_url
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        return client.post(f"/v1/executions/{execution_id}/approvals/{call_id}", json=body)


YES = {"decision": "approve"}


def learn(stack: E2EStack, execution_id: str) -> dict[str, Any]:
    """The capability the run taught, ingested as the learning worker ingests it (the policy
    stack runs no learning worker)."""
    with stack.db() as conn, conn.transaction():
        done = ingest_executions(
            conn, execution_ids=[execution_id], embedder=get_embedder(stack.settings)
        )[execution_id]
    assert done.outcome == "learned" and done.capability is not None, done
    return done.capability


async def skill_text(stack: E2EStack, capability: str) -> str:
    """The ``SKILL.md`` the caller's MCP session is served for the capability."""
    async with mcp_session(stack) as session:
        listed = await session.list_resources()
        for resource in listed.resources:
            if str(resource.uri).startswith("skill://"):
                read = await session.read_resource(resource.uri)
                text = "\n".join(getattr(c, "text", "") for c in read.contents)
                if f'agentcards-capability: "{capability}"' in text:
                    return text
    raise AssertionError(f"no skill of {capability} is listed")


def sse_event_of(stack: E2EStack, headers: dict[str, str], path: str, kind: str) -> Any:
    """The data of the first SSE event of type ``kind`` on ``path``."""
    with (
        httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client,
        client.stream("GET", path) as stream,
    ):
        for event in each_event(stream):
            if event.get("event") == kind:
                return json.loads(event["data"])
    raise AssertionError(f"no {kind} event on {path}")


def _ask_nobody_answers(stack: E2EStack, into: dict[str, Any]) -> None:
    """A refund of 4 through an MCP client that declared elicitation and whose person never
    answers: what the code returned (``result``) and what the person was asked (``asked``)."""
    asked: list[str] = []

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        await asyncio.sleep(decisions.APPROVAL_TIMEOUT_S * 3)  # the person is away
        return types.ElicitResult(action="cancel")

    async def call() -> None:
        as_agent = dataclasses.replace(stack, headers=key(stack, "silent-agent"))
        async with mcp_session(as_agent, elicitation_callback=elicitation) as session:
            arguments = {"code": PYTHON, "args": {"amount": 4, "to": "refund"}}
            called = await session.call_tool("execute_code", arguments)
        data = called.structured_content or {}
        view = data["result"] if set(data) == {"result"} else data
        into["result"], into["asked"] = view.get("result"), asked

    asyncio.run(call())


def _answer_into(answers: list[httpx.Response], *args: Any) -> None:
    answers.append(answer(*args))


def refunds() -> list[dict[str, Any]]:
    return [c for c in recorded() if c["tool"] == "pay" and c["args"]["to"] in ("refund", "vendor")]


def amounts() -> list[float]:
    """The amounts of the payments that needed approval and reached the server."""
    return [c["args"]["amount"] for c in refunds()]


def test_approved_runs_once_denied_and_unanswered_never_in_both_languages(
    stack: E2EStack,
) -> None:
    payer, boss = key(stack, "payer", admin=True), key(stack, "boss", admin=True)
    clerk = key(stack, "clerk")  # not an admin
    # An agent whose person is asked (elicitation) and never answers: its call ends
    # ``approval_timeout`` with the approval's time (beside the unanswered run below).
    silent: dict[str, Any] = {}
    agent = threading.Thread(target=_ask_nobody_answers, args=(stack, silent))
    agent.start()
    # Unanswered: its run's own limit (16 s) is below the approval's time (20 s, and 2 s
    # more, given while it waits: the run asks again once, its trace says `pending` once);
    # up to the cap (12 s) the wait does not spend it.
    slow = submit(stack, payer, PYTHON, args={"amount": 3, "to": "refund"}, timeout_s=16)
    # Past the cap, waiting counts: a run of 3 s waiting for an answer ends after 3 + 12 s.
    capped = submit(stack, payer, PYTHON, args={"amount": 2, "to": "refund"}, timeout_s=3)
    paused(stack, payer, slow)
    with stack.db() as conn:  # as if it had waited 100 s: far past its limit and the grace
        for table, column in (("executions", "started_at"), ("approvals", "created_at")):
            conn.execute(
                f"UPDATE {table} SET {column} = {column} - interval '100 seconds' "
                f"WHERE {'id' if table == 'executions' else 'execution_id'} = %s",
                (slow,),
            )
        conn.execute(
            "UPDATE approvals SET expires_at = expires_at + interval '2 seconds' "
            "WHERE execution_id = %s",
            (slow,),
        )
        conn.commit()
        (row,) = _candidates(conn, queue_max_s=60, execution_id=slow)
    assert row["overdue"] is False  # its waiting does not count: not taken for hung
    assert read(stack, payer, slow)["status"] == "waiting_approval"  # a read reaps no run
    # The listing (REST, the dashboard's) and the events stream say it waits, and for what.
    with httpx.Client(base_url=stack.gateway_url, headers=payer, timeout=60) as client:
        listed = client.get("/v1/executions", params={"limit": 200}).json()["executions"]
        waiting = client.get("/v1/executions", params={"status": "waiting_approval"}).json()
    (item,) = [e for e in listed if e["id"] == slow]
    assert item["status"] == "waiting_approval", item
    assert [p["args"] for p in item["pending_approvals"]] == [{"amount": 3, "to": "refund"}]
    assert slow in [e["id"] for e in waiting["executions"]], waiting
    assert {e["status"] for e in waiting["executions"]} == {"waiting_approval"}, waiting
    asked = sse_event_of(stack, payer, f"/v1/executions/{slow}/events", "approval")
    assert asked["status"] == "pending" and asked["execution_status"] == "waiting_approval"
    assert [(p["tool"], p["args"]) for p in asked["pending_approvals"]] == [
        ("pay", {"amount": 3, "to": "refund"})
    ], asked
    approved = ""
    for language, code, amount, decision in (
        ("python", PYTHON, 7, "approve"),
        ("typescript", TYPESCRIPT, 8, "deny"),
    ):
        run_id = submit(
            stack,
            payer,
            code,
            language=language,
            args={"amount": amount, "to": "refund"},
            **({"intent": REFUND_INTENT} if decision == "approve" else {}),
        )
        approved = run_id if decision == "approve" else approved
        view = paused(stack, payer, run_id)
        (pending,) = view["pending_approvals"]
        assert (pending["server"], pending["tool"], pending["args"]) == (
            "rec",
            "pay",
            {"amount": amount, "to": "refund"},
        )
        assert pending["policies"] == ["refunds-need-approval"]
        with stack.db() as conn:  # the row keeps the real arguments sealed, never in clear
            (stored,) = conn.execute(
                "SELECT args::text AS args FROM approvals WHERE execution_id = %s", (run_id,)
            ).fetchall()
        assert stored["args"].startswith('"sealed:v1:'), stored
        assert "refund" not in stored["args"], stored
        call_id = pending["call_id"]
        assert amount not in amounts()  # nothing reached the server while it waits
        # Bad answers: a malformed body, an unknown call, the caller (an admin, but the
        # caller), a key that is not an admin. Nothing is half-decided by them.
        bad = answer(stack, boss, run_id, call_id, {"decision": "maybe"})
        unknown = answer(stack, boss, run_id, "call-99", {"decision": "approve"})
        own = answer(stack, payer, run_id, call_id, {"decision": "approve"})
        stranger = answer(stack, clerk, run_id, call_id, {"decision": "approve"})
        assert bad.status_code == 422, bad.text
        assert unknown.status_code == 404, unknown.text
        assert own.status_code == 403 and "caller" in own.json()["error"]["message"], own.text
        assert stranger.status_code == 403 and "admin" in stranger.json()["error"]["message"]
        assert read(stack, payer, run_id)["status"] == "waiting_approval"
        # Two answers at once: exactly one is recorded, the other is told it closed.
        body = {"decision": decision, "reason": f"{language} checked"}
        answers: list[httpx.Response] = []
        racers = [
            threading.Thread(
                target=_answer_into, args=(answers, stack, boss, run_id, call_id, body)
            )
            for _ in range(2)
        ]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        codes = sorted(a.status_code for a in answers)
        assert codes == [200, 409], [a.text for a in answers]
        closed = next(a for a in answers if a.status_code == 409).json()["error"]
        assert closed["type"] == "approval_closed"
        done = finished(stack, payer, run_id)
        assert done["status"] == "succeeded", done
        if decision == "approve":
            assert done["result"] == f"paid {float(amount)} to refund"
        else:
            kind, policies, message = done["result"]
            assert (kind, policies) == ("approval_denied", ["refunds-need-approval"])
            assert "key:boss" in message and "typescript checked" in message
        # Once: the approved payment reached the server exactly once, the denied one never.
        paid = amounts()
        assert paid.count(amount) == (1 if decision == "approve" else 0), paid
        again = answer(stack, boss, run_id, call_id, {"decision": "approve"})
        assert again.status_code == 409, again.text
        with stack.db() as conn:
            row = conn.execute("SELECT trace FROM executions WHERE id = %s", (run_id,)).fetchone()
            audit = conn.execute(
                "SELECT action, details FROM audit_log WHERE execution_id = %s "
                "AND action LIKE 'approval_%%' ORDER BY id",
                (run_id,),
            ).fetchall()
        assert row is not None
        approvals = [
            (e["status"], e["by"], e["reason"]) for e in row["trace"] if e["type"] == "approval"
        ]
        status = "approved" if decision == "approve" else "denied"
        assert approvals == [
            ("pending", None, None),
            (status, "key:boss", f"{language} checked"),
        ], approvals
        assert [a["action"] for a in audit] == ["approval_requested", "approval_decided"]
        assert audit[1]["details"]["by"] == "key:boss"
        assert audit[1]["details"]["decision"] == decision
    timed_out = finished(stack, payer, slow)
    assert timed_out["status"] == "succeeded", timed_out
    assert timed_out["result"][:2] == ["approval_timeout", ["refunds-need-approval"]]
    assert 3 not in amounts()
    with stack.db() as conn:
        traced = conn.execute("SELECT trace FROM executions WHERE id = %s", (slow,)).fetchone()
    assert traced is not None
    asked_again = [(e["status"], e["by"]) for e in traced["trace"] if e["type"] == "approval"]
    assert asked_again == [("pending", None), ("expired", None)], asked_again
    over = finished(stack, payer, capped)
    assert over["status"] == "timeout", over
    assert over["error"]["details"]["waiting_on"][0]["tool"].startswith("rec"), over["error"]
    with stack.db() as conn:  # closed as its run ended: nothing will run the call
        (late,) = conn.execute(
            "SELECT call_id, status, reason FROM approvals WHERE execution_id = %s", (capped,)
        ).fetchall()
    assert late["status"] == "expired", late
    assert late["reason"].startswith("abandoned: its run ended (timeout)"), late
    closed = answer(stack, boss, capped, late["call_id"], YES)
    assert closed.status_code == 409, closed.text
    assert closed.json()["error"]["type"] == "approval_closed"
    assert closed.json()["error"]["details"]["status"] == "abandoned", closed.text
    assert 2 not in amounts()
    agent.join(timeout=120)
    assert silent["result"][:2] == ["approval_timeout", ["refunds-need-approval"]], silent
    assert len(silent["asked"]) == 1 and '"amount":4' in silent["asked"][0], silent
    assert 4 not in amounts()
    # The metrics name each outcome (counted cluster-wide: other tests' calls add to them).
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        text = client.get("/metrics").text
    outcomes = {
        line.split('"')[1]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("agentcards_approvals_total{")
    }
    for outcome in ("executed", "approval_denied", "approval_timeout"):
        assert outcomes.get(outcome, 0) >= 1, outcomes
    assert outcomes.get("requested", 0) >= 3, outcomes
    # The approved run taught a capability: search and its skill say who must be asked.
    capability = learn(stack, approved)
    with httpx.Client(base_url=stack.gateway_url, headers=payer, timeout=60) as client:
        found = client.post("/v1/capabilities/search", json={"intent": REFUND_INTENT})
    assert found.status_code == 200, found.text
    (hit,) = [c for c in found.json()["capabilities"] if c["id"] == str(capability["id"])]
    assert hit["approval_tools"] == ["rec:pay"], hit
    skill = asyncio.run(skill_text(dataclasses.replace(stack, headers=payer), hit["name"]))
    assert 'agentcards-approval-tools: "rec:pay"' in skill, skill
    assert "## Needs approval" in skill and "- `rec:pay`" in skill, skill
    # So does its bundle, and the install importing it keeps it.
    with stack.db() as conn:
        _, other = issue_key(conn, tenant_id="policy-import", name="importer", admin=True)
    ids = {"ids": str(capability["id"])}
    with httpx.Client(base_url=stack.gateway_url, timeout=60) as client:
        exported = client.get("/v1/capabilities/export", params=ids, headers=payer).json()
        importer = {"Authorization": f"Bearer {other}"}
        made = client.post("/v1/capabilities/import", json=exported, headers=importer)
        assert made.status_code == 200, made.text
        again = client.get("/v1/capabilities/export", headers=importer).json()
    assert [e["approval_tools"] for e in exported["capabilities"]] == [["rec:pay"]], exported
    assert [e["approval_tools"] for e in again["capabilities"]] == [["rec:pay"]], again


async def test_approvers_by_group_the_inbox_a_capability_and_a_direct_call(
    stack: E2EStack, idp: IdentityProvider
) -> None:
    """``@approvers("engineers")``: alice (engineers) answers, carol (readers) may not; each
    sees the inbox that is hers. A capability's run and a direct MCP call wait for their
    answer as a script does. Prompts are decided too (``get_prompt``)."""
    ci = key(stack, "ci")
    alice = {"Authorization": f"Bearer {idp.token('alice')}"}
    carol = {"Authorization": f"Bearer {idp.token('carol')}"}
    before = len(refunds())

    async def direct_call() -> Any:
        async with direct_session(stack, ci) as session:
            return await session.call_tool("pay", {"amount": 11, "to": "vendor"})

    call = asyncio.create_task(direct_call())
    # And a direct call made as a task (no sandbox): it waits for its answer the same way.
    tasks = await asyncio.to_thread(LegacySession, dataclasses.replace(stack, headers=ci),
                                    "/mcp/servers/rec")  # fmt: skip
    paying = {"name": "pay", "arguments": {"amount": 12, "to": "vendor"}, "task": {}}
    task_id = (await asyncio.to_thread(tasks.request, "tools/call", paying))["result"]["task"][
        "taskId"
    ]
    with httpx.Client(base_url=stack.gateway_url, headers=ci, timeout=60) as client:
        code = "return await mcp.rec.pay(amount=args['amount'], to='vendor')"
        body = {"code": code, "intent": "pay a vendor", "name": "vendor_cap"}
        made = await asyncio.to_thread(client.post, "/v1/capabilities", json=body)
        assert made.status_code == 201, made.text
        started = await asyncio.to_thread(
            client.post, "/v1/capabilities/vendor_cap/execute", json={"args": {"amount": 5}}
        )
    assert started.status_code in (200, 202), started.text
    capability_run = started.json()["id"]

    def inbox(headers: dict[str, str]) -> list[dict[str, Any]]:
        with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
            got = client.get("/v1/approvals")
        assert got.status_code == 200, got.text
        return [p for p in got.json()["pending"] if p["args"].get("to") == "vendor"]

    seen: list[dict[str, Any]] = []

    def listed() -> bool:
        seen[:] = inbox(alice)
        return len(seen) == 3

    await asyncio.to_thread(wait_until, listed, what="alice's inbox shows all", timeout_s=60)
    assert sorted(p["args"]["amount"] for p in seen) == [5, 11, 12]
    assert all(p["approvers"] == ["engineers"] for p in seen)
    assert await asyncio.to_thread(inbox, carol) == []
    assert len(refunds()) == before  # neither reached the server
    for pending in seen:
        where = (pending["execution_id"], pending["call_id"])
        no = await asyncio.to_thread(answer, stack, carol, *where, {"decision": "approve"})
        assert no.status_code == 403 and "engineers" in no.json()["error"]["message"], no.text
        yes = await asyncio.to_thread(
            answer, stack, alice, *where, {"decision": "approve", "reason": "vendor known"}
        )
        assert yes.status_code == 200 and yes.json()["decided_by"] == "user:alice", yes.text
    result = await asyncio.wait_for(call, timeout=60)
    assert not result.is_error, result
    ran = await asyncio.to_thread(finished, stack, ci, capability_run)
    assert ran["status"] == "succeeded" and ran["result"] == "paid 5.0 to vendor", ran
    task = await asyncio.to_thread(tasks.until_done, task_id, timeout_s=60)
    assert task["status"] == "completed", task
    assert sorted(c["args"]["amount"] for c in refunds()[before:]) == [5, 11, 12]
    # Prompts: decided by the gateway with the prompt's arguments; a refused one never
    # reaches its server.
    async with direct_session(stack, ci) as session:
        hello = await session.get_prompt("greeting", {"name": "bob"})
        with pytest.raises(MCPError) as refused:
            await session.get_prompt("greeting", {"name": "mallory"})
    assert "bob" in json.dumps(hello.model_dump())
    assert refused.value.code == INVALID_REQUEST, refused.value
    assert refused.value.data["type"] == "policy_denied", refused.value
    assert refused.value.data["details"]["policies"] == []
    prompts = [c["args"]["name"] for c in recorded() if c["tool"] == "prompt"]
    assert prompts == ["bob"]


async def test_the_callers_person_answers_through_elicitation(stack: E2EStack) -> None:
    """An MCP client that declared elicitation is asked (a form: the server, tool and
    arguments; approve or not, a reason); its person's yes runs the call once, a no raises
    ``approval_denied`` with their reason."""
    asked: list[str] = []

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        approve = '"amount":21' in params.message
        return types.ElicitResult(
            action="accept", content={"approve": approve, "reason": "asked at the agent"}
        )

    as_agent = dataclasses.replace(stack, headers=key(stack, "agent"))
    outcomes = {}
    async with mcp_session(as_agent, elicitation_callback=elicitation) as session:
        for amount in (21, 22):
            called = await session.call_tool(
                "execute_code", {"code": PYTHON, "args": {"amount": amount, "to": "refund"}}
            )
            assert not called.is_error, called
            data = called.structured_content or {}
            outcomes[amount] = data["result"] if set(data) == {"result"} else data
    assert outcomes[21]["status"] == "succeeded", outcomes[21]
    assert outcomes[21]["result"] == "paid 21.0 to refund"
    kind, policies, message = outcomes[22]["result"]
    assert (kind, policies) == ("approval_denied", ["refunds-need-approval"])
    assert "asked at the agent" in message and "elicitation" in message
    assert amounts().count(21) == 1 and 22 not in amounts()
    assert len(asked) == 2 and "rec:pay" in asked[0] and '"to":"refund"' in asked[0]


async def test_a_stateless_clients_person_answers_through_input_required(stack: E2EStack) -> None:
    """MCP 2026-07-28 (the SDK's ``Client``: no session, no request mid-call): the approval's
    form reaches the client as an ``InputRequiredResult``, and its retry carries the answer.
    A script's call and a direct call: approved, each runs once; denied, ``approval_denied``."""
    asked: list[str] = []

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        approve = any(f'"amount":{n}' in params.message for n in (71, 73))
        schema = params.requested_schema  # type: ignore[union-attr]
        assert set(schema["properties"]) == {"approve", "reason"}, schema
        return types.ElicitResult(
            action="accept", content={"approve": approve, "reason": "asked statelessly"}
        )

    agent = key(stack, "stateless-agent")
    outcomes: dict[int, Any] = {}
    async with create_mcp_http_client(headers=agent) as http:
        async with Client(
            streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http),
            elicitation_callback=elicitation,
        ) as modern:
            assert modern.protocol_version == "2026-07-28"
            for amount in (71, 72):
                called = await modern.call_tool(
                    "execute_code", {"code": PYTHON, "args": {"amount": amount, "to": "refund"}}
                )
                assert not called.is_error, called
                data = called.structured_content or {}
                outcomes[amount] = data["result"] if set(data) == {"result"} else data
        async with Client(
            streamable_http_client(f"{stack.gateway_url}/mcp/servers/rec", http_client=http),
            elicitation_callback=elicitation,
        ) as direct:
            assert direct.protocol_version == "2026-07-28"
            for amount in (73, 74):
                outcomes[amount] = await direct.call_tool("pay", {"amount": amount, "to": "refund"})
    assert outcomes[71]["status"] == "succeeded", outcomes[71]
    assert outcomes[71]["result"] == "paid 71.0 to refund"
    kind, policies, message = outcomes[72]["result"]
    assert (kind, policies) == ("approval_denied", ["refunds-need-approval"])
    assert "asked statelessly" in message and "elicitation" in message
    assert not outcomes[73].is_error and "paid 73.0 to refund" in json.dumps(
        outcomes[73].model_dump(mode="json")
    ), outcomes[73]
    refused = tool_error(outcomes[74])
    assert refused["type"] == "approval_denied", refused
    assert "asked statelessly" in refused["message"], refused
    paid = amounts()
    assert (paid.count(71), paid.count(73)) == (1, 1) and not {72, 74} & set(paid), paid
    assert len(asked) == 4 and all("rec:pay" in q for q in asked), asked


async def test_a_direct_call_whose_client_goes_away_closes_its_approval(stack: E2EStack) -> None:
    """A direct call waiting for approval whose client goes away (a 2025-11-25 session ended
    with ``DELETE``; a 2026-07-28 client's request dropped) can no longer run: its approval
    leaves the approvers' inbox, an answer is 409 ``approval_closed`` (abandoned), the
    closing is audited, and nothing reaches the server."""
    caller, boss = key(stack, "leaver", admin=True), key(stack, "boss6", admin=True)
    url = f"{stack.gateway_url}/mcp/servers/rec"
    pay = {"name": "pay", "arguments": {"amount": 91, "to": "refund"}}

    def legacy_call_then_end_the_session() -> None:
        with httpx.Client(headers=caller | ACCEPT, timeout=60) as http:
            session = open_legacy_session(http, url)
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": pay}
            with http.stream("POST", url, json=call, headers=session) as calling:
                next(each_event(calling))  # the call is under way; then its stream drops
            _inbox_entry(stack, boss, 91)
            assert http.delete(url, headers=session).status_code in (200, 204)

    async def stateless_call() -> None:
        async with (
            create_mcp_http_client(headers=caller) as http,
            Client(streamable_http_client(url, http_client=http)) as modern,
        ):
            await modern.call_tool("pay", {"amount": 92, "to": "refund"})

    await asyncio.to_thread(legacy_call_then_end_the_session)
    left = asyncio.create_task(stateless_call())
    await asyncio.to_thread(_inbox_entry, stack, boss, 92)
    left.cancel()  # the client goes away mid-call
    with pytest.raises(asyncio.CancelledError):
        await left

    def closed() -> bool:
        with httpx.Client(base_url=stack.gateway_url, headers=boss, timeout=60) as client:
            pending = client.get("/v1/approvals").json()["pending"]
        return not [p for p in pending if (p["args"] or {}).get("amount") in (91, 92)]

    await asyncio.to_thread(wait_until, closed, what="both approvals leave the inbox")
    with stack.db() as conn:
        rows = conn.execute(
            "SELECT a.execution_id, a.call_id, a.status, a.reason FROM approvals a "
            "JOIN api_keys k ON k.id::text = a.caller_key WHERE k.name = 'leaver'"
        ).fetchall()
        audit = conn.execute(
            "SELECT details FROM audit_log WHERE action = 'approval_decided' "
            "AND execution_id::text = ANY(%s)",
            ([str(r["execution_id"]) for r in rows],),
        ).fetchall()
    assert len(rows) == 2 and {r["status"] for r in rows} == {"expired"}, rows
    assert all(r["reason"].startswith("abandoned: ") for r in rows), rows
    assert sorted(a["details"]["decision"] for a in audit) == ["abandoned", "abandoned"], audit
    for row in rows:
        late = await asyncio.to_thread(
            answer, stack, boss, str(row["execution_id"]), row["call_id"], YES
        )
        assert late.status_code == 409, late.text
        error = late.json()["error"]
        assert error["type"] == "approval_closed" and "abandoned" in error["message"], error
    assert not {91, 92} & set(amounts())


def test_runs_waiting_for_approval_do_not_stall_the_others(stack: E2EStack) -> None:
    """As many runs wait for approval as the sandbox worker has pool processes, and a new run
    still runs to its end while they wait: each waiting run gives its place back (the pool
    grows by one per waiting run, AGENTCARDS_APPROVAL_MAX_PARKED at most), and the pool is
    back to its size once they went on."""
    payer, boss = key(stack, "payer5", admin=True), key(stack, "boss5", admin=True)
    worker = psutil.Process(stack.procs["sandbox"].proc.pid)
    argv = worker.cmdline()
    size = int(argv[argv.index("--concurrency") + 1])  # its pool processes, when none waits

    def pool_at_size() -> bool:  # its children: the pool processes (the sandboxes are theirs)
        return len(worker.children()) == size

    # Runs of the tests before may have just ended: their places are given back first.
    wait_until(pool_at_size, what="the pool at its size", proc=stack.procs["sandbox"])
    waiting = [
        submit(stack, payer, PYTHON, args={"amount": 60 + i, "to": "refund"}, timeout_s=120)
        for i in range(size)
    ]
    calls = [paused(stack, payer, run_id)["pending_approvals"][0]["call_id"] for run_id in waiting]
    other = submit(stack, payer, "return 6 * 7")
    done = finished(stack, payer, other)
    assert done["status"] == "succeeded" and done["result"] == 42, done
    for run_id in waiting:  # they still wait: the new run did not wait for one of them to end
        assert read(stack, payer, run_id)["status"] == "waiting_approval"
    for run_id, call_id in zip(waiting, calls, strict=True):
        no = answer(stack, boss, run_id, call_id, {"decision": "deny", "reason": "not today"})
        assert no.status_code == 200, no.text
    for run_id in waiting:
        ended = finished(stack, payer, run_id)
        assert ended["status"] == "succeeded", ended
        assert ended["result"][:2] == ["approval_denied", ["refunds-need-approval"]], ended
    wait_until(
        pool_at_size,
        what="the pool back to its size",
        proc=stack.procs["sandbox"],
    )
    assert not {60, 61} & set(amounts())


def test_a_run_whose_worker_dies_while_it_waits_runs_the_call_once_or_closes_it(
    stack: E2EStack,
) -> None:
    """The pool processes running two paused runs are killed. ``retry: safe``: the approval
    given while no worker runs it holds, and the re-run redeems it: the call reaches the
    server once, and the person is asked once. ``retry: never``: the run ends
    ``worker_lost`` and its approval is closed with it (out of the approvers' inbox, an
    answer 409 ``approval_closed``, the closing audited); the call never reaches the server.
    (Only pool processes die: their worker makes others, so the shared stack goes on.)"""
    payer, boss = key(stack, "payer2", admin=True), key(stack, "boss2", admin=True)
    run_id = submit(stack, payer, PYTHON, args={"amount": 31, "to": "refund"}, retry="safe")
    lost_id = submit(stack, payer, PYTHON, args={"amount": 32, "to": "refund"})
    (pending,) = paused(stack, payer, run_id)["pending_approvals"]
    (lost_pending,) = paused(stack, payer, lost_id)["pending_approvals"]
    assert _inbox_entry(stack, boss, 32)["call_id"] == lost_pending["call_id"]
    client = redis.Redis.from_url(stack.settings.redis_url or "")

    def running() -> list[int]:  # a process's new run rides its next beat (within ~1 s)
        beats = read_sandbox_beats(client)
        return [int(b.worker.rsplit(":", 1)[1]) for b in beats if b.busy in (run_id, lost_id)]

    wait_until(lambda: len(running()) == 2, what="both paused runs' processes", timeout_s=10)
    pids = running()
    assert set(pids) <= {c.pid for c in psutil.Process(stack.procs["sandbox"].proc.pid).children()}
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    yes = answer(stack, boss, run_id, pending["call_id"], {"decision": "approve"})
    assert yes.status_code == 200, yes.text
    done = finished(stack, payer, run_id)
    assert done["status"] == "succeeded" and done["attempts"] == 2, done
    assert done["result"] == "paid 31.0 to refund"
    assert amounts().count(31) == 1
    lost = finished(stack, payer, lost_id)
    assert lost["status"] == "worker_lost", lost
    # Closed as the run ended (the same transaction): no longer in the inbox, nor answerable.
    with httpx.Client(base_url=stack.gateway_url, headers=boss, timeout=60) as http:
        inbox = http.get("/v1/approvals").json()["pending"]
    assert lost_pending["call_id"] not in {p["call_id"] for p in inbox}, inbox
    late = answer(stack, boss, lost_id, lost_pending["call_id"], YES)
    assert late.status_code == 409, late.text
    error = late.json()["error"]
    assert error["type"] == "approval_closed" and "abandoned" in error["message"], error
    with stack.db() as conn:
        asked = conn.execute(
            "SELECT count(*) AS n FROM audit_log WHERE execution_id = %s "
            "AND action = 'approval_requested'",
            (run_id,),
        ).fetchone()
        closing = conn.execute(
            "SELECT details FROM audit_log WHERE execution_id = %s AND action = 'approval_decided'",
            (lost_id,),
        ).fetchall()
    assert asked is not None and asked["n"] == 1
    assert [c["details"]["decision"] for c in closing] == ["abandoned"], closing
    assert "worker_lost" in closing[0]["details"]["reason"], closing
    assert 32 not in amounts()


def test_a_run_and_a_direct_call_waiting_through_a_gateway_restart_lose_nothing(
    stack: E2EStack,
) -> None:
    """The gateway is killed (SIGKILL) while a run and a direct call (a 2025-11-25 session on
    ``/mcp/servers/rec``, its connection dropped) wait for approval, and started again: the
    run still shows its paused call (the wait is in the sandbox worker, the approval in
    Postgres); the direct call's client resumes its stream (``Last-Event-ID``), the new
    gateway takes the session over and the call waits on, as the same execution. Answers
    given to the new gateway resume both; each call runs once, and the resumed stream
    carries the direct call's result.

    The approvals are given three minutes, as a longer ``AGENTCARDS_APPROVAL_TIMEOUT_S``
    would: a gateway's start can take longer than this stack's 20 s on a loaded machine (the
    waiting run asks again when its first 20 s are over and waits on)."""
    payer, boss = key(stack, "payer3", admin=True), key(stack, "boss3", admin=True)
    # A limit far past the wait for the restart: waiting past the cap counts against it.
    run_id = submit(stack, payer, PYTHON, args={"amount": 41, "to": "refund"}, timeout_s=150)
    paused(stack, payer, run_id)
    url = f"{stack.gateway_url}/mcp/servers/rec"
    with httpx.Client(headers=payer | ACCEPT, timeout=60) as http:
        session = open_legacy_session(http, url)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "pay", "arguments": {"amount": 43, "to": "refund"}}}  # fmt: skip
        with http.stream("POST", url, json=call, headers=session) as calling:
            primed = next(each_event(calling))  # then the connection drops, as a dying one does
    direct = _inbox_entry(stack, boss, 43)
    with stack.db() as conn:
        conn.execute(
            "UPDATE approvals SET expires_at = now() + interval '3 minutes' "
            "WHERE execution_id = ANY(%s)",
            ([run_id, direct["execution_id"]],),
        )
    (pending,) = paused(stack, payer, run_id)["pending_approvals"]
    gateway = stack.procs["gateway"]
    os.killpg(gateway.proc.pid, signal.SIGKILL)
    gateway.proc.wait()
    # The gateway back, and a second one beside it (both answer the same approval below).
    port = free_port()
    second_url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "services.gateway"]
    second = stack.start("gateway-2", argv, extra_env={"AGENTCARDS_GATEWAY_PORT": str(port)})
    restarted = stack.start("gateway", argv)
    for base, proc in ((stack.gateway_url, restarted), (second_url, second)):
        wait_until(
            lambda b=base: _healthy(b), what=f"a gateway at {base}", timeout_s=120, proc=proc
        )
    (after,) = paused(stack, payer, run_id)["pending_approvals"]
    assert after == pending  # the same call, its arguments opened by the new gateway
    assert amounts().count(43) == 0
    # The direct call's client resumes its stream; the new gateway takes the session over.
    resumed: list[dict[str, Any]] = []
    resume = session | {"accept": "text/event-stream", "last-event-id": primed["id"]}
    listener = threading.Thread(target=_answer_on_stream, args=(url, payer, resume, 7, resumed))
    listener.start()
    # Two gateways answer the run's call at once: exactly one answer stands, the other 409.
    answers: list[httpx.Response] = []
    where = (run_id, pending["call_id"])
    racers = [
        threading.Thread(target=_answer_into, args=(answers, base, boss, *where, YES))
        for base in (stack.gateway_url, second_url)
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    closed = next(a for a in answers if a.status_code == 409).json()["error"]
    assert closed["type"] == "approval_closed", closed
    os.killpg(second.proc.pid, signal.SIGTERM)  # the stack goes on with its one gateway
    yes = answer(stack, boss, direct["execution_id"], direct["call_id"], YES)
    assert yes.status_code == 200, yes.text
    done = finished(stack, payer, run_id)
    assert done["status"] == "succeeded" and done["result"] == "paid 41.0 to refund", done
    assert done["attempts"] == 1  # the run went on; nothing was run again
    listener.join(timeout=120)
    (reply,) = resumed
    assert reply["result"]["isError"] is False, reply
    assert "paid 43.0 to refund" in json.dumps(reply["result"]), reply
    ran = finished(stack, payer, direct["execution_id"])  # the same execution, recorded once
    assert ran["status"] == "succeeded", ran
    assert amounts().count(41) == 1 and amounts().count(43) == 1
    second.proc.wait()
    again = answer(stack, boss, run_id, pending["call_id"], {"decision": "approve"})
    assert again.status_code == 409, again.text
    with stack.db() as conn:
        audit = conn.execute(
            "SELECT execution_id::text AS id, action FROM audit_log WHERE execution_id = ANY(%s) "
            "AND action LIKE 'approval_%%' ORDER BY id",
            ([run_id, direct["execution_id"]],),
        ).fetchall()
    for execution_id in (run_id, direct["execution_id"]):
        actions = [a["action"] for a in audit if a["id"] == execution_id]
        assert actions == ["approval_requested", "approval_decided"], (execution_id, actions)


ACCEPT = {"accept": "application/json, text/event-stream"}


def open_legacy_session(http: httpx.Client, url: str) -> dict[str, str]:
    """A 2025-11-25 session (raw HTTP) at ``url``: the headers its requests carry."""
    with http.stream("POST", url, json=INIT) as opened:
        next(each_event(opened))
        session = {
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=initialized, headers=session).status_code == 202
    return session


def _answer_on_stream(
    url: str, headers: dict[str, str], resume: dict[str, str], request_id: int, into: list[Any]
) -> None:
    """The JSON-RPC answer to ``request_id`` a resumed stream carries (its other messages
    skipped), appended to ``into``."""
    with (
        httpx.Client(headers=headers, timeout=120) as http,
        http.stream("GET", url, headers=resume) as stream,
    ):
        for event in each_event(stream):
            message = json.loads(event["data"]) if event.get("data") else {}
            if message.get("id") == request_id:
                into.append(message)
                return


def _inbox_entry(stack: E2EStack, headers: dict[str, str], amount: int) -> dict[str, Any]:
    """The approver's inbox entry for the paused payment of ``amount``, once it is there."""
    seen: list[dict[str, Any]] = []

    def listed() -> bool:
        with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
            got = client.get("/v1/approvals")
        seen[:] = [p for p in got.json()["pending"] if (p["args"] or {}).get("amount") == amount]
        return bool(seen)

    wait_until(listed, what=f"the payment of {amount} waits for approval", timeout_s=60)
    return seen[0]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
