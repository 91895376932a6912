"""The dashboard and /docs in a real headless Chromium, over a real stack with 50+ learned capabilities."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from shared.auth.store import issue_key
from tests.integration.dashboard.conftest import LEARNED, capability_code, run
from tests.stack import E2EStack, wait_until

pytestmark = pytest.mark.timeout(900)
Stack = tuple[E2EStack, dict[str, str]]
VIOLET = "rgb(139,92,246)"
MIN_LABEL_PX = 9


# The drawn links as sorted pairs of their ends' labels.
LINKS_JS = (
    "cy.edges().map(e => [e.source().data('label'), e.target().data('label')].sort().join(' | '))"
    ".sort()"
)
# Pairs of top-level nodes (capability boxes with their labels) that overlap on screen.
BOX_OVERLAPS_JS = """
const boxes = cy.nodes().orphans().map(n => n.boundingBox({includeLabels: true}));
let overlaps = 0;
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) overlaps++;
}
return overlaps;
"""


def _wait(browser: webdriver.Chrome, script: str, *, timeout: float = 60) -> Any:
    """Poll a JS expression until it is truthy."""
    return WebDriverWait(browser, timeout).until(lambda d: d.execute_script(f"return !!({script})"))


def _page_errors(browser: webdriver.Chrome) -> list[str]:
    """Console errors that break a page: CSP refusals (a CDN, inline code) and script errors."""
    return [
        e["message"]
        for e in browser.get_log("browser")
        if e["level"] == "SEVERE"
        and ("Content Security Policy" in e["message"] or "Uncaught" in e["message"])
    ]


@pytest.fixture(scope="module")
def dashboard(stack: Stack, browser: webdriver.Chrome) -> webdriver.Chrome:
    """The page opened once with the key entered in its form (kept in localStorage)."""
    dash, auth = stack
    browser.get(f"{dash.gateway_url}/dashboard")
    form = browser.find_element(By.ID, "key-form")
    _wait(browser, "!document.querySelector('#key-form').hidden")
    browser.find_element(By.ID, "key-input").send_keys(
        auth["Authorization"].removeprefix("Bearer ")
    )
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser, "document.body.dataset.rendered")
    return browser


def test_the_three_views_draw_and_the_choice_is_remembered(
    dashboard: webdriver.Chrome, artifacts: Path
) -> None:
    counts = {}
    for view in ("tools", "capabilities", "hypergraph"):
        dashboard.find_element(By.CSS_SELECTOR, f'button[data-view="{view}"]').click()
        _wait(dashboard, f"document.body.dataset.rendered === '{view}' && window.cy")
        counts[view] = dashboard.execute_script(
            "return {caps: cy.nodes('[kind = \"capability\"]').length,"
            " parents: cy.nodes(':parent').length, tools: cy.nodes('[kind = \"tool\"]').length,"
            " colour: cy.nodes('[kind = \"capability\"]').map(n => n.style('background-color'))[0],"
            " shape: cy.nodes('[kind = \"capability\"]').map(n => n.style('shape'))[0],"
            # Against what is visible now: the legend below takes its room after the drawing.
            " inside: (b => b.x1 >= -1 && b.y1 >= -1 && b.x2 <= cy.container().clientWidth + 1"
            "   && b.y2 <= cy.container().clientHeight + 1)"
            "   (cy.elements().renderedBoundingBox({includeLabels: true})),"
            f" overlaps: (() => {{ {BOX_OVERLAPS_JS} }})(),"
            " labelPx: cy.zoom() * Math.min(...cy.nodes().orphans()"
            "   .map(n => parseFloat(n.style('font-size')))),"
            f" components: cy.elements().components().length, links: {LINKS_JS}}}"
        )
        dashboard.save_screenshot(str(artifacts / f"view-{view}.png"))
    assert counts["tools"]["caps"] == 0 and counts["tools"]["tools"] >= 5  # example + time tools
    assert counts["capabilities"]["caps"] >= LEARNED and counts["capabilities"]["tools"] == 0
    assert counts["capabilities"]["colour"].replace(" ", "") == VIOLET
    assert counts["capabilities"]["shape"] == "round-rectangle"
    # Compound: every capability holds its own tool instances.
    assert counts["hypergraph"]["parents"] >= LEARNED
    assert counts["hypergraph"]["tools"] > counts["hypergraph"]["parents"]
    # Nothing is clipped by the container; the boxes (labels included) never cover each other.
    assert all(counts[view]["inside"] for view in counts), counts
    assert counts["hypergraph"]["overlaps"] == 0
    # Readable at the fitted zoom: top-level labels (capabilities, or tools) drawn at >= 9 px.
    assert all(counts[view]["labelPx"] >= MIN_LABEL_PX for view in counts), counts
    dashboard.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities'")
    dashboard.refresh()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities' && window.cy")
    active = dashboard.find_element(By.CSS_SELECTOR, "#views button.active")
    assert active.get_attribute("data-view") == "capabilities"
    # The capabilities (which all share a tool) are one graph, and a reload draws the same links:
    # ties between equal links go by name, not by their random ids.
    assert counts["capabilities"]["components"] == 1, counts["capabilities"]["components"]
    assert dashboard.execute_script(f"return {LINKS_JS}") == counts["capabilities"]["links"]
    assert _page_errors(dashboard) == []


def test_a_capability_opens_its_code_panel_and_copies_its_code(
    dashboard: webdriver.Chrome, stack: Stack, artifacts: Path
) -> None:
    dashboard.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities'")
    # Click the node where it is drawn on the canvas, as a user would.
    target = dashboard.execute_script(
        "const n = cy.nodes('[kind = \"capability\"]')[0]; cy.zoom(1.5); cy.center(n);"
        " const p = n.renderedPosition(), r = cy.container().getBoundingClientRect();"
        " return {id: n.data('capability_id'), name: n.data('label'), x: r.left + p.x, y: r.top + p.y}"
    )
    webdriver.ActionChains(dashboard).move_by_offset(target["x"], target["y"]).click().perform()
    webdriver.ActionChains(dashboard).move_by_offset(-target["x"], -target["y"]).perform()
    _wait(dashboard, "!document.querySelector('#code-panel').hidden")
    panel = dashboard.find_element(By.ID, "code-panel")
    assert panel.get_attribute("data-capability-id") == target["id"]
    assert dashboard.find_element(By.ID, "cap-name").get_attribute("value") == target["name"]
    code = dashboard.find_element(By.ID, "cap-code")
    assert "await mcp." in code.text
    assert code.find_elements(By.CSS_SELECTOR, ".token")  # highlighted by Prism
    assert "success rate" in panel.text and "usage" in panel.text and "version" in panel.text
    dashboard.find_element(By.ID, "copy-code").click()
    _wait(dashboard, "!document.querySelector('#toast').hidden")
    assert dashboard.find_element(By.ID, "toast").text == "Code copied"
    dashboard.save_screenshot(str(artifacts / "code-panel.png"))
    # Rename it and give it an alias: saved through PATCH, the graph shows the new name.
    name = dashboard.find_element(By.ID, "cap-name")
    name.clear()
    name.send_keys("renamed_in_the_browser")
    dashboard.find_element(By.ID, "cap-aliases").send_keys("a phrasing, another phrasing")
    dashboard.find_element(By.ID, "cap-save").click()
    _wait(dashboard, "document.querySelector('#toast').textContent === 'Saved'")
    node = f"cy.getElementById('cap:{target['id']}')"
    _wait(dashboard, f"{node}.length && {node}.data('label') === 'renamed_in_the_browser'")
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:
        listed = client.get("/api/capabilities", params={"q": "another phrasing"}).json()
    assert [c["id"] for c in listed["capabilities"]] == [target["id"]]
    dashboard.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    _wait(dashboard, "document.querySelector('#code-panel').hidden")


def test_filtering_by_success_rate_dims_the_capabilities_below_it(
    dashboard: webdriver.Chrome, stack: Stack, artifacts: Path
) -> None:
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, timeout=120, headers=auth) as client:
        learned = run(client, {"code": "return await mcp.example.divide(a=1, b=args['b'])",
                               "intent": "divide one by b", "args": {"b": 2}})  # fmt: skip
        cap_id = learned["capability"]["id"]
        failed = client.post(
            f"/v1/capabilities/{cap_id}/execute", params={"wait": "true"}, json={"args": {"b": 0}}
        ).json()
        assert failed["status"] == "failed", failed

        def rates() -> dict[str, float]:
            listed = client.get("/api/capabilities", params={"limit": 500}).json()
            return {c["id"]: c["success_rate"] for c in listed["capabilities"]}

        # The learning worker counts the failed run shortly after it finished.
        wait_until(lambda: rates()[cap_id] < 0.8, what="the failed run counted")
        by_id = rates()
    dashboard.refresh()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities'")
    _wait(dashboard, f"cy.getElementById('cap:{cap_id}').length === 1")
    slider = dashboard.find_element(By.ID, "f-rate")
    slider.send_keys(*([Keys.ARROW_RIGHT] * 16))  # 16 steps of 5% = 80%
    above = sum(1 for r in by_id.values() if r >= 0.8)
    _wait(dashboard, f"document.querySelector('#match-count').textContent === '{above} match'")
    classes = dashboard.execute_script(
        "return {dimmed: cy.nodes('.dimmed[kind = \"capability\"]').map(n => n.data('capability_id')),"
        " matched: cy.nodes('.match').length}"
    )
    assert set(classes["dimmed"]) == {cid for cid, r in by_id.items() if r < 0.8} == {cap_id}
    assert classes["matched"] == above
    dashboard.save_screenshot(str(artifacts / "filter-success-rate.png"))
    slider.send_keys(Keys.HOME)
    _wait(dashboard, "cy.nodes('.dimmed').length === 0")


def _download(browser: webdriver.Chrome, into: Path, button: str) -> dict[str, Any]:
    """Click an export button and read the bundle Chromium saved into ``into``."""
    into.mkdir(parents=True)
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(into)}
    )
    browser.find_element(By.ID, button).click()
    saved = into / "agentcards-capabilities.json"
    wait_until(saved.exists, what=f"{saved} downloaded")
    bundle: dict[str, Any] = orjson.loads(saved.read_bytes())
    return bundle


def test_the_explorer_searches_filters_by_server_and_exports_what_is_ticked(
    dashboard: webdriver.Chrome, stack: Stack, tmp_path: Path
) -> None:
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:

        def ids(**params: Any) -> set[str]:
            listed = client.get("/api/capabilities", params={"limit": 500, **params}).json()
            return {c["id"] for c in listed["capabilities"]}

        on_time, everything = ids(server="time"), ids()
        searched = ids(server="time", q="step 7:")
    assert len(searched) == 1 and 0 < len(on_time) < len(everything)
    dashboard.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities'")
    _wait(
        dashboard,
        "[...document.querySelectorAll('#f-server option')].some(o => o.value === 'time')",
    )
    server = dashboard.find_element(By.ID, "f-server")
    server.send_keys("time")  # typed, as a keyboard user picks an option
    assert Select(server).first_selected_option.get_attribute("value") == "time"
    _wait(
        dashboard, f"document.querySelector('#match-count').textContent === '{len(on_time)} match'"
    )
    shown = dashboard.execute_script(
        "return {bright: cy.nodes('[kind = \"capability\"]').filter(n => !n.hasClass('dimmed'))"
        ".map(n => n.data('capability_id')),"
        " listed: [...document.querySelectorAll('#cap-list li')].map(li => li.dataset.capabilityId)}"
    )
    assert set(shown["bright"]) == set(shown["listed"]) == on_time
    dashboard.find_element(By.ID, "search").send_keys("step 7:")
    _wait(dashboard, "document.querySelector('#match-count').textContent === '1 match'")
    assert dashboard.execute_script(
        "return [...document.querySelectorAll('#cap-list li')].map(li => li.dataset.capabilityId)"
    ) == list(searched)
    dashboard.find_element(By.ID, "search").send_keys(*[Keys.BACKSPACE] * len("step 7:"))
    _wait(
        dashboard, f"document.querySelector('#match-count').textContent === '{len(on_time)} match'"
    )
    boxes = dashboard.find_elements(By.CSS_SELECTOR, "#cap-list input[type=checkbox]")[:2]
    for box in boxes:
        box.click()
    ticked = {box.get_attribute("value") for box in boxes}
    selected = _download(dashboard, tmp_path / "selected", "export-selected")
    assert selected["format"] == "agentcards.capabilities"
    assert {c["id"] for c in selected["capabilities"]} == ticked
    assert all(c["code"] and c["parameters_schema"] for c in selected["capabilities"])
    every = _download(dashboard, tmp_path / "all", "export-all")
    assert {c["id"] for c in every["capabilities"]} == everything
    server.send_keys("any")
    _wait(dashboard, "cy.nodes('.dimmed').length === 0")


def test_the_explorer_filters_by_usage_and_date_and_sorts_like_the_api(
    dashboard: webdriver.Chrome, stack: Stack
) -> None:
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:

        def listed(**params: Any) -> list[str]:
            body = client.get("/api/capabilities", params={"limit": 500, **params}).json()
            return [c["id"] for c in body["capabilities"]]

        used_twice, by_rate = listed(min_usage=2), listed(sort="success_rate")
    assert 0 < len(used_twice) < len(by_rate)

    def shown() -> list[str]:
        return list(
            dashboard.execute_script(
                "return [...document.querySelectorAll('#cap-list li')]"
                ".map(li => li.dataset.capabilityId)"
            )
        )

    dashboard.find_element(By.CSS_SELECTOR, 'button[data-view="capabilities"]').click()
    _wait(dashboard, "document.body.dataset.rendered === 'capabilities'")
    usage = dashboard.find_element(By.ID, "f-usage")
    usage.send_keys(Keys.ARROW_UP, Keys.ARROW_UP)  # 0 -> 2
    _wait(
        dashboard,
        f"document.querySelector('#match-count').textContent === '{len(used_twice)} match'",
    )
    assert set(shown()) == set(used_twice)
    usage.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN)
    _wait(dashboard, "cy.nodes('.dimmed').length === 0")
    dashboard.find_element(By.ID, "f-sort").send_keys("success rate")
    _wait(
        dashboard,
        f"document.querySelector('#cap-list li')?.dataset.capabilityId === '{by_rate[0]}'",
    )
    assert shown() == by_rate
    # Nothing was used after tomorrow: every capability is dimmed; clearing the date restores.
    dashboard.execute_script(
        "const d = document.querySelector('#f-from');"
        " d.value = new Date(Date.now() + 2 * 86400e3).toISOString().slice(0, 10);"
        " d.dispatchEvent(new Event('input'))"
    )
    _wait(dashboard, "document.querySelector('#match-count').textContent === '0 match'")
    assert dashboard.execute_script(
        "return cy.nodes('[kind = \"capability\"]').every(n => n.hasClass('dimmed'))"
    )
    dashboard.execute_script(
        "const d = document.querySelector('#f-from'); d.value = ''; d.dispatchEvent(new Event('input'))"
    )
    _wait(dashboard, "cy.nodes('.dimmed').length === 0")
    dashboard.find_element(By.ID, "f-sort").send_keys("usage")


def test_the_metrics_strip_shows_the_tenants_numbers_and_links_flower(
    dashboard: webdriver.Chrome, stack: Stack
) -> None:
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:
        summary = client.get("/api/metrics/summary").json()
    learned, flower = summary["capabilities_learned"], summary["flower_url"]
    assert learned >= LEARNED and flower
    _wait(dashboard, f"document.querySelector('#m-learned').textContent === '{learned}'")
    strip = dashboard.execute_script(
        "return {epm: document.querySelector('#m-epm').textContent,"
        " success: document.querySelector('#m-success').textContent,"
        " cache: document.querySelector('#m-cache').textContent,"
        " flower: document.querySelector('#flower-link').getAttribute('href'),"
        " hidden: document.querySelector('#flower-link').hidden}"
    )
    assert re.fullmatch(r"\d+\.\d", strip["epm"]), strip
    assert re.fullmatch(r"\d+%", strip["success"]), strip
    if summary["cache_hit_rate"] is None:  # no cacheable run yet: a dash, not "0%"
        assert strip["cache"] == "\u2013", strip
    else:
        assert re.fullmatch(r"\d+%", strip["cache"]), strip
    assert strip["flower"] == flower and strip["hidden"] is False


def test_the_metrics_strip_shows_the_search_adapters_passes(
    dashboard: webdriver.Chrome, stack: Stack
) -> None:
    # The tenant's runs were consolidated soon after they were learned (the stack runs no
    # beat: ingestion queued the passes); the strip names the newest pass as the summary
    # reports it, once a pass has read every run.
    dash, auth = stack

    def newest_pass_read_every_run() -> dict[str, Any] | None:
        with dash.db() as conn:
            return conn.execute(  # type: ignore[no-any-return]
                # The adapter's newest fit once a pass read every run (ingestion may have
                # fitted it too, so its versions run ahead of the pass's).
                "SELECT a.version, a.trained_on FROM tool_vector_versions t CROSS JOIN LATERAL "
                "(SELECT version, trained_on FROM query_adapters WHERE tenant_id = 'acme' "
                "ORDER BY version DESC LIMIT 1) a WHERE t.tenant_id = 'acme' "
                "AND t.runs_seen = (SELECT count(*) FROM intent_tools WHERE tenant_id = 'acme' "
                "AND cardinality(tools_ok) > 0) ORDER BY t.version DESC LIMIT 1"
            ).fetchone()

    wait_until(newest_pass_read_every_run, what="a pass over every run of the tenant")
    fit = newest_pass_read_every_run()
    assert fit is not None
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:
        learning = client.get("/api/metrics/summary").json()["search_learning"]
    last, use = learning["last"], learning["in_use"]
    assert (last["version"], last["trained_on"]) == (fit["version"], fit["trained_on"])
    assert last["trained_on"] > 0
    if use is None:
        shown = f"none (v{last['version']} kept: "
    else:
        shown = f"v{use['version']} · {use['trained_on']} runs · "
    _wait(dashboard, f"document.querySelector('#m-adapter').textContent.startsWith({shown!r})")
    if use is not None and use["version"] != last["version"]:
        kept = f"(v{last['version']} kept: "
        _wait(dashboard, f"document.querySelector('#m-adapter').textContent.includes({kept!r})")

    # A tenant with no pass yet: the strip says so in words, not with a bare dash.
    with dash.db() as conn:
        _, fresh = issue_key(conn, tenant_id=f"t-nopass-{uuid.uuid4().hex[:8]}")
        conn.commit()
    mine = auth["Authorization"].removeprefix("Bearer ")
    try:
        dashboard.execute_script(f"localStorage.setItem('agentcards_key', {fresh!r})")
        dashboard.refresh()
        _wait(dashboard, "document.querySelector('#m-adapter').textContent === 'none yet'")
    finally:
        dashboard.execute_script(f"localStorage.setItem('agentcards_key', {mine!r})")
        dashboard.refresh()
        _wait(dashboard, "document.body.dataset.rendered")


def test_a_new_capability_appears_live_without_a_reload(
    dashboard: webdriver.Chrome, stack: Stack, artifacts: Path
) -> None:
    dash, auth = stack
    dashboard.find_element(By.CSS_SELECTOR, 'button[data-view="hypergraph"]').click()
    _wait(dashboard, "document.body.dataset.rendered === 'hypergraph'")
    _wait(dashboard, "document.querySelector('#live-state').textContent === '● live'")
    dashboard.execute_script("window.__samePage = true")
    with httpx.Client(base_url=dash.gateway_url, timeout=120, headers=auth) as client:
        result = run(client, {"code": capability_code(1000), "intent": "a capability learned live"})
    cap_id = result["capability"]["id"]
    _wait(dashboard, f"cy.getElementById('cap:{cap_id}').length === 1")
    assert dashboard.execute_script("return window.__samePage") is True  # no reload happened
    assert (
        dashboard.execute_script(f"return cy.getElementById('cap:{cap_id}').children().length") >= 1
    )
    dashboard.save_screenshot(str(artifacts / "live-capability.png"))


def test_docs_list_the_endpoints_offline(
    browser: webdriver.Chrome, stack: Stack, artifacts: Path
) -> None:
    dash, _ = stack
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{dash.gateway_url}/docs")
    _wait(browser, "document.querySelectorAll('.opblock').length > 10")
    paths = browser.execute_script(
        "return [...document.querySelectorAll('.opblock-summary-path')].map(e => e.textContent)"
    )
    assert {"/api/graph/hypergraph", "/api/graph/tools", "/v1/executions"} <= {
        p.replace("\u200b", "") for p in paths
    }
    browser.save_screenshot(str(artifacts / "docs.png"))
    assert _page_errors(browser) == []


def test_the_capability_panel_disables_enables_and_deletes_after_asking(
    dashboard: webdriver.Chrome, stack: Stack
) -> None:
    dash, auth = stack
    with httpx.Client(base_url=dash.gateway_url, headers=auth) as client:
        created = client.post(
            "/v1/capabilities",
            json={"code": "return 'buttons'", "intent": "press the panel's buttons",
                  "name": "panel_buttons"},
        ).json()  # fmt: skip
        url = f"/v1/capabilities/{created['id']}"
        # Another test may have left the browser on another page (/docs): open the dashboard
        # again (the key stays in localStorage).
        dashboard.get(f"{dash.gateway_url}/dashboard")
        _wait(dashboard, "document.body.dataset.rendered && window.agentcards")
        dashboard.execute_script("return agentcards.openPanel(arguments[0])", created["id"])
        _wait(
            dashboard,
            f"document.querySelector('#code-panel').dataset.capabilityId === '{created['id']}'",
        )
        toggle = dashboard.find_element(By.ID, "cap-toggle")
        assert toggle.text == "Disable"
        toggle.click()
        _wait(dashboard, "document.querySelector('#toast').textContent === 'Disabled'")
        assert client.get(url).json()["disabled"] is True
        _wait(dashboard, "document.querySelector('#cap-toggle').textContent === 'Enable'")
        assert "disabled" in dashboard.find_element(By.ID, "cap-stats").text
        dashboard.find_element(By.ID, "cap-toggle").click()
        _wait(dashboard, "document.querySelector('#toast').textContent === 'Enabled'")
        assert client.get(url).json()["disabled"] is False
        # Delete asks first: dismissed, nothing happens; accepted, it is gone.
        dashboard.find_element(By.ID, "cap-delete").click()
        WebDriverWait(dashboard, 10).until(lambda d: d.switch_to.alert)
        assert "panel_buttons" in dashboard.switch_to.alert.text
        dashboard.switch_to.alert.dismiss()
        assert client.get(url).status_code == 200
        dashboard.find_element(By.ID, "cap-delete").click()
        WebDriverWait(dashboard, 10).until(lambda d: d.switch_to.alert)
        dashboard.switch_to.alert.accept()
        _wait(dashboard, "document.querySelector('#toast').textContent === 'Deleted'")
        assert dashboard.find_element(By.ID, "code-panel").get_attribute("hidden") is not None
        assert client.get(url).status_code == 404
