"""The operator's views on a real stack: executions (list, filters, detail), the graph's legend,
degraded servers, a capability's schema, run form and cache facts; and the REST filters behind
them. Real servers: the example server (divide is cached by the operator's override), the time
server, and `flaky`, an example server that cannot start again once its `crash` tool killed it.

The approvals inbox runs on the policy stack of tests/integration/policy (shared: its policy
file asks for approvals, and its people sign in at its identity provider)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from shared.auth.store import issue_key
from shared.db import connect
from tests.integration.dashboard.test_dashboard_browser import _page_errors, _wait
from tests.integration.dashboard.test_signin_browser import sign_in
from tests.integration.identity.provider import IdentityProvider
from tests.integration.mcp_servers import example_server, time_server
from tests.integration.policy import test_approvals as approvals
from tests.integration.policy import test_decisions as policy
from tests.stack import REPO, E2EStack, stack_fixture, wait_until

pytestmark = pytest.mark.timeout(600)
DIVIDE_TTL_S = 120  # the operator's TTL for example:divide: the capability's TTL


def flaky_server(tmp: Path) -> dict[str, Any]:
    """The example server the first time it starts; every later start exits 3 (stays retrying)."""
    marker = tmp / "flaky-started"
    code = (
        "import os, sys\n"
        f"if os.path.exists({str(marker)!r}): sys.exit(3)\n"
        f"open({str(marker)!r}, 'w').close()\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'deploy.examples.example_server'])\n"
    )
    entry = example_server(tmp / "flaky")
    return {**entry, "command": sys.executable, "args": ["-c", code], "cwd": str(REPO)}


def servers(tmp: Path) -> dict[str, Any]:
    cached_divide = {"cache": {"tools": {"divide": {"read_only": True, "ttl_s": DIVIDE_TTL_S}}}}
    return {
        "example": {**example_server(tmp), "agentcards": cached_divide},
        "time": time_server(),
        "flaky": flaky_server(tmp),
    }


ops_stack = stack_fixture(servers)
policy_stack, policy_idp = policy.stack, policy.idp  # the approvals inbox's (see above)


def submit(client: httpx.Client, code: str, intent: str, **body: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/executions", params={"wait": "true"}, json={"code": code, "intent": intent, **body}
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.fixture(scope="module")
def runs(ops_stack: E2EStack) -> Iterator[dict[str, Any]]:
    """A key for tenant `ops`, and its runs, oldest first: one that succeeds (and is learned as
    a capability), one failing with a tool error, one raising, and one killing `flaky`."""
    with connect(ops_stack.settings.database_url or "") as conn:
        _, key = issue_key(conn, tenant_id="ops", name="operator")
        _, other = issue_key(conn, tenant_id="elsewhere", name="other tenant")
        conn.commit()
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=ops_stack.gateway_url, timeout=120, headers=auth) as client:
        ok = submit(client, "return await mcp.example.divide(a=args['a'], b=args['b'])",
                    "divide a by b", args={"a": 6, "b": 3})  # fmt: skip
        assert ok["status"] == "succeeded" and ok["capability"], ok
        tool_error = submit(client, "return await mcp.example.divide(a=1, b=0)", "divide by zero")
        raised = submit(
            client, "raise ValueError('the operator should see this')", "fail on purpose"
        )
        crashed = submit(client, "return await mcp.flaky.crash()", "kill the flaky server")
    for failed in (tool_error, raised, crashed):
        assert failed["status"] == "failed", failed
    assert raised["error"]["type"] == "runtime_error"
    assert tool_error["error"]["type"] != "runtime_error"

    def flaky_degraded() -> bool:
        with httpx.Client(base_url=ops_stack.gateway_url, headers=auth) as client:
            found = {s["name"]: s for s in client.get("/v1/servers").json()["servers"]}
        return found["flaky"]["state"] == "retrying"

    wait_until(flaky_degraded, what="flaky retrying")
    yield {
        "auth": auth,
        "other": {"Authorization": f"Bearer {other}"},
        "ok": ok,
        "tool_error": tool_error,
        "raised": raised,
        "crashed": crashed,
        "capability_id": ok["capability"]["id"],
    }


@pytest.fixture(scope="module")
def api(ops_stack: E2EStack, runs: dict[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ops_stack.gateway_url, timeout=120, headers=runs["auth"]) as client:
        yield client


def ids(page: dict[str, Any]) -> list[str]:
    return [e["id"] for e in page["executions"]]


def test_the_listing_filters_by_status_and_error_type_and_pages(
    api: httpx.Client, runs: dict[str, Any]
) -> None:
    newest_first = [runs[k]["id"] for k in ("crashed", "raised", "tool_error", "ok")]
    everything = api.get("/v1/executions").json()
    assert ids(everything) == newest_first and everything["total"] == 4
    first = everything["executions"][-1]
    assert (
        first["tenant_id"] == "ops"
        and first["started_at"]
        and first["tool_calls"][0]["tool"] == "example:divide"
    )
    assert first["result"] == 2 and first["stdout"] == ""
    brief = api.get("/v1/executions", params={"brief": "true"}).json()
    assert ids(brief) == newest_first and brief["executions"][-1]["result"] is None
    assert brief["executions"][-1]["tool_calls"] == first["tool_calls"]
    failed = api.get("/v1/executions", params={"status": "failed"}).json()
    assert ids(failed) == newest_first[:3] and failed["total"] == 3
    both = api.get("/v1/executions", params=[("status", "failed"), ("status", "succeeded")]).json()
    assert both["total"] == 4
    raised = api.get("/v1/executions", params={"error_type": "runtime_error"}).json()
    assert ids(raised) == [runs["raised"]["id"]] and raised["total"] == 1
    tool_error = runs["tool_error"]["error"]["type"]
    assert runs["tool_error"]["id"] in ids(
        api.get("/v1/executions", params={"error_type": tool_error}).json()
    )
    none = api.get(
        "/v1/executions", params={"status": "succeeded", "error_type": "runtime_error"}
    ).json()
    assert none == {"executions": [], "total": 0, "limit": 20, "offset": 0}
    page = api.get("/v1/executions", params={"limit": 2, "offset": 1}).json()
    assert ids(page) == newest_first[1:3] and page["total"] == 4
    # Another tenant sees none of them.
    assert api.get("/v1/executions", headers=runs["other"]).json()["total"] == 0


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"status": "broken"}, "status"),
        ({"error_type": "no_such_type"}, "error_type"),
        ({"limit": 0}, "limit"),
        ({"offset": -1}, "offset"),
    ],
)
def test_a_bad_filter_is_a_422_naming_the_parameter(
    api: httpx.Client, params: dict[str, Any], named: str
) -> None:
    response = api.get("/v1/executions", params=params)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "validation_error"
    # e.g. "invalid request: query.status.0: Input should be 'queued', 'running', … or 'rejected'"
    assert f"query.{named}" in error["message"]
    assert [d["field"].split(".")[1] for d in error["details"]] == [named]


def test_the_breakdown_counts_statuses_and_error_types(
    api: httpx.Client, runs: dict[str, Any]
) -> None:
    counts = api.get("/v1/executions/breakdown").json()
    assert counts["total"] == 4 and counts["by_status"] == {"failed": 3, "succeeded": 1}
    assert counts["by_error_type"]["runtime_error"] == 1
    assert sum(counts["by_error_type"].values()) == 3


def test_the_submission_shows_the_code_and_args_to_its_tenant_only(
    api: httpx.Client, runs: dict[str, Any]
) -> None:
    submitted = api.get(f"/v1/executions/{runs['ok']['id']}/submission").json()
    assert submitted["code"] == "return await mcp.example.divide(a=args['a'], b=args['b'])"
    assert submitted["args"] == {"a": 6, "b": 3} and submitted["tenant_id"] == "ops"
    elsewhere = api.get(f"/v1/executions/{runs['ok']['id']}/submission", headers=runs["other"])
    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["type"] == "not_found"


def test_cache_facts_of_an_unknown_capability_are_a_404(api: httpx.Client) -> None:
    response = api.get("/v1/capabilities/no-such-capability/cache")
    assert (
        response.status_code == 404 and "no-such-capability" in response.json()["error"]["message"]
    )


@pytest.fixture(scope="module")
def page(ops_stack: E2EStack, runs: dict[str, Any], browser: webdriver.Chrome) -> webdriver.Chrome:
    """The dashboard opened with the key entered in its form."""
    browser.get(f"{ops_stack.gateway_url}/dashboard")
    _wait(browser, "!document.querySelector('#key-form').hidden")
    browser.find_element(By.ID, "key-input").send_keys(
        runs["auth"]["Authorization"].removeprefix("Bearer ")
    )
    browser.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    _wait(browser, "document.body.dataset.rendered")
    return browser


def _rows(browser: webdriver.Chrome) -> list[str]:
    return list(
        browser.execute_script(
            "return [...document.querySelectorAll('#ex-rows tr[data-execution-id]')]"
            ".map(tr => tr.dataset.executionId)"
        )
    )


def test_the_executions_view_lists_filters_and_opens_a_failed_run(
    page: webdriver.Chrome, runs: dict[str, Any], artifacts: Path
) -> None:
    page.find_element(By.CSS_SELECTOR, 'button[data-view="executions"]').click()
    _wait(
        page,
        "document.body.dataset.rendered === 'executions' && document.body.dataset.executionsLoaded",
    )
    newest_first = [runs[k]["id"] for k in ("crashed", "raised", "tool_error", "ok")]
    assert _rows(page) == newest_first
    table = page.find_element(By.ID, "ex-table").text
    assert "succeeded" in table and "failed" in table and "runtime_error" in table
    assert "example:divide" in table and "ops" in table  # tools called, tenant
    assert "4 executions" in page.find_element(By.ID, "ex-breakdown").text
    page.save_screenshot(str(artifacts / "executions.png"))

    Select(page.find_element(By.ID, "ex-status")).select_by_value("failed")
    _wait(page, "document.body.dataset.executionsLoaded.includes('status=failed')")
    assert _rows(page) == newest_first[:3]
    Select(page.find_element(By.ID, "ex-error-type")).select_by_value("runtime_error")
    _wait(page, "document.body.dataset.executionsLoaded.includes('error_type=runtime_error')")
    assert _rows(page) == [runs["raised"]["id"]]

    page.find_element(
        By.CSS_SELECTOR, f'#ex-rows tr[data-execution-id="{runs["raised"]["id"]}"] a'
    ).click()
    _wait(page, f"document.querySelector('#execution-panel').dataset.executionId === '{runs['raised']['id']}'"
                " && !document.querySelector('#execution-panel').hidden")  # fmt: skip
    panel = page.find_element(By.ID, "execution-panel")
    error = page.find_element(By.ID, "ex-error")
    assert "runtime_error" in error.text and "the operator should see this" in error.text
    assert "raise ValueError" in page.find_element(By.ID, "ex-code").text
    assert "fail on purpose" in panel.text
    page.save_screenshot(str(artifacts / "execution-failed.png"))

    # The link is shareable: opened fresh, it shows the same run; the successful one shows its
    # args, result and tool-call trace.
    page.get(f"{page.current_url.split('#')[0]}#execution/{runs['ok']['id']}")
    _wait(
        page,
        f"document.querySelector('#execution-panel').dataset.executionId === '{runs['ok']['id']}'",
    )
    assert '"a": 6' in page.find_element(By.ID, "ex-args").text
    assert page.find_element(By.ID, "ex-result").text == "2"  # JSON of 2.0
    assert "✓ example:divide" in page.find_element(By.ID, "ex-trace").text
    Select(page.find_element(By.ID, "ex-error-type")).select_by_value("")
    Select(page.find_element(By.ID, "ex-status")).select_by_value("")
    assert _page_errors(page) == []


def test_the_legend_explains_the_view_and_degraded_servers_are_marked(
    page: webdriver.Chrome, artifacts: Path
) -> None:
    page.find_element(By.CSS_SELECTOR, 'button[data-view="tools"]').click()
    _wait(page, "document.body.dataset.rendered === 'tools' && window.cy")
    legend = page.find_element(By.ID, "legend")
    _wait(page, "document.querySelector('#legend').dataset.view === 'tools'")
    assert legend.is_displayed()
    for text in (
        "tool of server example",
        "tool of server flaky",
        "sequence",
        "co-used",
        "degraded",
    ):
        assert text in legend.text, legend.text
    # The flaky server is flagged in the header, and its tools in the graph.
    _wait(page, "document.querySelector('.server-chip.degraded[data-server=\"flaky\"]')")
    chip = page.find_element(By.CSS_SELECTOR, '.server-chip[data-server="flaky"]')
    assert "degraded (retrying)" in chip.text
    example = page.find_element(By.CSS_SELECTOR, '.server-chip[data-server="example"]')
    assert "degraded" not in example.text
    # Served directly, and the MCP revision it negotiated.
    assert example.get_attribute("data-direct") == "/mcp/servers/example"
    protocol = example.get_attribute("data-protocol")
    assert protocol and f"direct · MCP {protocol}" in example.text, example.text
    _wait(page, "cy.nodes('.degraded').length > 0")
    marked = page.execute_script(
        "return [...new Set(cy.nodes('.degraded').map(n => n.data('server')))]"
    )
    assert marked == ["flaky"]
    assert page.execute_script("return cy.nodes('.degraded')[0].style('border-style')") == "dashed"
    # Every server its own colour, the same in its chip and in the graph, and never grey (an
    # unavailable tool's colour in the legend) for a server that is ready.
    chips = page.execute_script(
        "return [...document.querySelectorAll('.server-chip')].map(c => [c.dataset.server,"
        " c.dataset.state, getComputedStyle(c.querySelector('.dot')).backgroundColor,"
        " AgentCardsGraph.serverColour(c.dataset.server)])"
    )
    assert len(chips) >= 3 and len({dot for _, _, dot, _ in chips}) == len(chips), chips
    for server, state, dot, _ in chips:
        rgb = [int(x) for x in re.findall(r"\d+", dot)[:3]]
        assert state != "ready" or max(rgb) - min(rgb) > 60, (server, dot)  # a hue, not grey
    drawn = page.execute_script(
        "return cy.nodes('[kind = \"tool\"]').map(n => [n.data('server'), n.data('colour')])"
    )
    hexes = {server: hex_ for server, _, _, hex_ in chips}
    assert all(hexes.get(server, colour) == colour for server, colour in drawn), drawn
    # Five more servers (names that shared a colour, or got grey, when a hash picked it).
    more = page.execute_script(
        "const names = ['everything', 'filesystem', 'memory', 'time', 'git'];"
        " AgentCardsGraph.assignColours(names);"
        " return names.map(n => AgentCardsGraph.serverColour(n))"
    )
    every = [*more, *(hex_ for server, _, _, hex_ in chips if server not in {"time"})]
    assert len(set(every)) == len(every), every
    for colour in every:
        rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
        assert max(rgb) - min(rgb) > 60, colour  # a hue, not grey
    page.save_screenshot(str(artifacts / "legend-degraded.png"))
    page.find_element(By.CSS_SELECTOR, 'button[data-view="hypergraph"]').click()
    _wait(page, "document.querySelector('#legend').dataset.view === 'hypergraph'")
    assert "capability" in legend.text and "calls" in legend.text and "co-used" not in legend.text


def test_a_capability_runs_from_its_schema_form_and_shows_cache_facts(
    page: webdriver.Chrome, runs: dict[str, Any], artifacts: Path
) -> None:
    cap_id = runs["capability_id"]
    page.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(page, f"document.querySelector('#cap-list li[data-capability-id=\"{cap_id}\"]')")
    page.find_element(By.CSS_SELECTOR, f'#cap-list li[data-capability-id="{cap_id}"] .name').click()
    _wait(page, f"document.querySelector('#cap-cache').dataset.capabilityId === '{cap_id}'")
    schema = page.find_element(By.ID, "cap-schema").text
    assert '"a"' in schema and '"b"' in schema and "number" in schema
    cache = page.find_element(By.ID, "cap-cache").text
    assert "no runs yet" in cache and f"{DIVIDE_TTL_S} s" in cache

    def run_form(a: str, b: str) -> str:
        for name, value in (("a", a), ("b", b)):
            field = page.find_element(By.ID, f"run-arg-{name}")
            field.clear()
            field.send_keys(value)
        page.find_element(By.ID, "cap-run-submit").click()
        _wait(
            page,
            "!['running', undefined].includes(document.querySelector('#cap-run-out').dataset.state)",
        )
        return str(page.find_element(By.ID, "cap-run-out").text)

    first = run_form("8", "2")
    assert first.startswith("succeeded") and "\n4" in first and "from the cache" not in first
    second = run_form("8", "2")
    assert "from the cache (capability)" in second and "\n4" in second
    _wait(page, "document.querySelector('#cap-cache').textContent.includes('1 of 2 runs')")
    assert "50%" in page.find_element(By.ID, "cap-cache").text
    failed = run_form("1", "0")
    assert failed.startswith("failed") and "division by zero" in failed
    page.execute_script("document.querySelector('#cap-cache').scrollIntoView()")
    page.save_screenshot(str(artifacts / "capability-run.png"))
    # A form value the schema refuses never runs: the gateway's 422 is shown.
    page.execute_script(
        "const b = document.querySelector('#run-arg-b'); b.type = 'text'; b.dataset.kind = 'json';"
        " b.value = '\"two\"'"
    )
    page.find_element(By.ID, "cap-run-submit").click()
    _wait(page, "document.querySelector('#cap-run-out').dataset.state === 'refused'")
    assert "validation_error" in page.find_element(By.ID, "cap-run-out").text
    assert _page_errors(page) == []


def test_a_finished_run_appears_in_the_open_executions_view_without_a_reload(
    page: webdriver.Chrome, api: httpx.Client
) -> None:
    page.find_element(By.CSS_SELECTOR, 'button[data-view="executions"]').click()
    _wait(page, "document.body.dataset.rendered === 'executions'")
    _wait(page, "document.querySelector('#live-state').textContent === '● live'")
    page.execute_script("window.__samePage = true")
    late = submit(api, "return 'late'", "a run finished while the operator watches")
    _wait(page, f"document.querySelector('#ex-rows tr')?.dataset.executionId === '{late['id']}'")
    assert page.execute_script("return window.__samePage") is True


def test_typescript_code_is_highlighted_as_typescript_in_both_panels(
    page: webdriver.Chrome, api: httpx.Client, artifacts: Path
) -> None:
    code = "const n: number = args.a;\nreturn await mcp.example.divide({ a: n, b: 2 });"
    ran = submit(api, code, "halve a number in typescript", language="typescript", args={"a": 9})
    assert ran["status"] == "succeeded" and ran["capability"], ran
    # Prism's TypeScript grammar (vendored, no CDN) marks the type annotation `number` as a
    # builtin; its Python grammar would not.
    typed = (
        "[...document.querySelectorAll('#{} .token.builtin')].some(t => t.textContent === 'number')"
    )
    page.get(f"{page.current_url.split('#')[0]}#execution/{ran['id']}")
    _wait(page, f"document.querySelector('#execution-panel').dataset.executionId === '{ran['id']}'")
    _wait(page, typed.format("ex-code"))
    assert page.find_element(By.ID, "ex-code").get_attribute("class") == "language-typescript"
    page.execute_script(f"window.agentcards.openPanel({ran['capability']['id']!r})")
    _wait(page, "!document.querySelector('#code-panel').hidden")
    _wait(page, typed.format("cap-code"))
    page.save_screenshot(str(artifacts / "code-panel-typescript.png"))
    # A Python capability opened next is Python again.
    page.execute_script("window.agentcards.openPanel(arguments[0])", _python_capability(api))
    _wait(page, "document.querySelector('#cap-code').className === 'language-python'")
    assert _page_errors(page) == []


def test_a_capability_s_versions_are_one_row_of_the_list_at_its_latest_version(
    page: webdriver.Chrome, api: httpx.Client
) -> None:
    """Two versions of one capability are one capability (issue 49): listed once, marked
    with its latest version and how many it has; the strip counts capabilities."""
    made = []
    for code in ('return "hi " + args["who"]', 'who = args["who"]\nreturn f"hi, {who}!"'):
        body = {"code": code, "intent": "greet someone", "name": "greet_by_name"}
        response = api.post("/v1/capabilities", json=body)
        assert response.status_code == 201, response.text
        made.append(response.json())
    assert [c["version"] for c in made] == [1, 2], made
    latest = made[1]["id"]
    page.find_element(By.CSS_SELECTOR, 'button[data-view="tools"]').click()
    page.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(page, f"document.querySelector('#cap-list li[data-capability-id=\"{latest}\"]')")
    rows = page.execute_script(
        "return [...document.querySelectorAll('#cap-list li')]"
        ".filter(li => li.querySelector('.name').textContent === 'greet_by_name')"
        ".map(li => [li.dataset.capabilityId, li.querySelector('.version').textContent])"
    )
    assert rows == [[latest, "v2 of 2"]], rows
    listed = api.get("/api/capabilities", params={"limit": 500}).json()
    assert len(listed["capabilities"]) == listed["total"]
    learned = api.get("/api/metrics/summary").json()["capabilities_learned"]
    assert learned == listed["total"], (learned, listed["total"])
    assert _page_errors(page) == []


def _python_capability(api: httpx.Client) -> str:
    found = api.post("/v1/capabilities/search", json={"intent": "divide a by b"}).json()
    python = [c for c in found["capabilities"] if c["language"] == "python"]
    assert python, found
    return str(python[0]["id"])


VENDOR = """
try:
    return await mcp.rec.pay(amount=args["amount"], to="vendor", memo=args["memo"])
except ToolCallError as e:
    return [e.type, e.policies, e.message]
"""


def test_an_approver_answers_paused_calls_from_the_dashboards_inbox(
    policy_stack: E2EStack, policy_idp: IdentityProvider, browser: webdriver.Chrome,
    artifacts: Path,
) -> None:  # fmt: skip
    """Two runs of the key `ci` wait for the engineers (`@approvers("engineers")`); alice
    signs in, her Approvals view lists both (the arguments' e-mail address as a token, as
    in the runs' output on the dashboard), and she approves one and denies the other with reasons,
    through the page's session and CSRF token. The approved payment reaches the server once
    with its real memo; the denied run's code sees her reason."""
    # Signed in first: the stack's approvals stay open 20 s (test_approvals.py waits one out).
    public_url = f"http://127.0.0.1:{policy.GATEWAY_PORT}"
    sign_in(browser, "alice", public_url=public_url, issuer=policy_idp.issuer)
    ci = approvals.key(policy_stack, "ci")
    email = "jane.doe@example.com"
    runs = {
        amount: approvals.submit(
            policy_stack, ci, VENDOR, args={"amount": amount, "memo": f"invoice {amount} {email}"}
        )
        for amount in (12, 13)
    }
    for run_id in runs.values():
        approvals.paused(policy_stack, ci, run_id)
    alice = {"Authorization": f"Bearer {policy_idp.token('alice')}"}
    with httpx.Client(base_url=policy_stack.gateway_url, headers=alice, timeout=60) as client:
        waiting = len(client.get("/v1/approvals").json()["pending"])  # ours, and any left open
    assert waiting >= 2
    # The executions view shows both runs waiting for approval, not running.
    browser.find_element(By.CSS_SELECTOR, 'button[data-view="executions"]').click()
    for run_id in runs.values():
        row = f"document.querySelector('#ex-rows tr[data-execution-id=\"{run_id}\"]')"
        _wait(browser, f"{row}?.dataset.status === 'waiting_approval'")
    browser.find_element(By.CSS_SELECTOR, 'button[data-view="approvals"]').click()
    _wait(browser, "document.body.dataset.rendered === 'approvals'")
    _wait(browser, f"document.querySelector('#ap-count').textContent === ' ({waiting})'")
    # The run's panel says what it waits for and leads back to the inbox.
    first = runs[12]
    browser.find_element(
        By.CSS_SELECTOR, f'li.approval[data-execution-id="{first}"] a.run-link'
    ).click()
    _wait(browser, f"document.querySelector('#execution-panel').dataset.executionId === '{first}'"
                   " && !document.querySelector('#ex-approvals').hidden")  # fmt: skip
    waits = browser.find_element(By.ID, "ex-approvals").text
    assert "rec:pay" in waits and "vendors-need-engineers" in waits, waits
    assert "waiting_approval" in browser.find_element(By.ID, "ex-stats").text
    browser.find_element(By.CSS_SELECTOR, "#ex-approvals .to-approvals").click()
    _wait(browser, "document.body.dataset.rendered === 'approvals'")
    cards = {
        run_id: browser.find_element(
            By.CSS_SELECTOR, f'#ap-list li.approval[data-execution-id="{run_id}"]'
        )
        for run_id in runs.values()
    }
    for amount, run_id in runs.items():
        text = cards[run_id].text
        assert "rec:pay" in text and "asked by key:ci" in text, text
        assert "vendors-need-engineers" in text and "engineers" in text, text
        args = cards[run_id].find_element(By.CSS_SELECTOR, "pre.args").text
        assert f'"amount": {amount}' in args and "\u27e8EMAIL_" in args, args
    inbox = browser.find_element(By.ID, "approvals-view").get_attribute("innerHTML") or ""
    assert email not in inbox  # tokenised, as the runs' output is on the dashboard
    browser.save_screenshot(str(artifacts / "approvals-inbox.png"))

    for amount, decision, reason in ((12, "approve", "known vendor"), (13, "deny", "not ours")):
        card = cards[runs[amount]]
        card.find_element(By.CSS_SELECTOR, "input.reason").send_keys(reason)
        card.find_element(By.CSS_SELECTOR, f"button.{decision}").click()
        state = "approved" if decision == "approve" else "denied"
        _wait(browser, f"document.querySelector('li.approval[data-execution-id=\"{runs[amount]}\"]')"
                       f".dataset.state === '{state}'")  # fmt: skip
        outcome = card.find_element(By.CSS_SELECTOR, ".outcome").text
        assert f"by user:alice: {reason}" in outcome, outcome
        assert all(not b.is_enabled() for b in card.find_elements(By.TAG_NAME, "button"))
    browser.save_screenshot(str(artifacts / "approvals-answered.png"))
    left = f" ({waiting - 2})" if waiting > 2 else ""
    _wait(browser, f"document.querySelector('#ap-count').textContent === '{left}'")

    paid = approvals.finished(policy_stack, ci, runs[12])
    assert paid["status"] == "succeeded" and paid["result"] == "paid 12.0 to vendor", paid
    denied = approvals.finished(policy_stack, ci, runs[13])["result"]
    assert denied[:2] == ["approval_denied", ["vendors-need-engineers"]], denied
    assert "user:alice" in denied[2] and "not ours" in denied[2], denied
    # Once, with the real memo; the denied one never.
    vendor = [c["args"] for c in policy.recorded() if c["args"].get("memo", "").endswith(email)]
    assert vendor == [{"amount": 12, "to": "vendor", "memo": f"invoice 12 {email}"}], vendor
    assert _page_errors(browser) == []
