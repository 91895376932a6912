"""People sign in to the dashboard at a real identity provider (npm `oidc-provider`) in a real
headless Chromium: their name is shown, their runs teach capabilities that name them, a
person without `agentcards:admin` cannot use admin actions, a page elsewhere cannot make the
dashboard's writes, and signing out ends the session everywhere. Flower (a real one,
behind the gateway at /flower/) opens to admins only, and refuses cross-site writes too.

Its own stack: the gateway's settings name the provider, a public URL (a fixed port) and the
gateway's client at the provider (the dashboard's sign-in), and Flower's port and password.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from shared.auth.store import issue_key
from shared.queues import SESSION_PREFIX
from tests.harness import Proc
from tests.integration.identity.provider import (
    IdentityProvider,
    free_port,
    gateway_options,
    running_provider,
)
from tests.integration.mcp_servers import time_server
from tests.stack import E2EStack, stack_fixture, wait_until

pytestmark = pytest.mark.timeout(900)

IDP_PORT, GATEWAY_PORT, FLOWER_PORT = free_port(), free_port(), free_port()
FLOWER_AUTH = "ops:flower-behind-the-gateway"  # Flower's own; only the gateway sends it
ISSUER = f"http://127.0.0.1:{IDP_PORT}"
PUBLIC_URL = f"http://127.0.0.1:{GATEWAY_PORT}"
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "groups": {
        "engineers": {"tools": ["time:*"], "scopes": ["agentcards:read", "agentcards:execute"]},
        "admins": {"scopes": ["agentcards:read", "agentcards:execute", "agentcards:admin"]},
    },
}
INTENT = "tell the current time in UTC for the sign-in test"
CODE = "now = await mcp.time.get_current_time(timezone='UTC')\nreturn {'now': now}"

signin_stack = stack_fixture(
    lambda tmp: {"time": time_server()},
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT),
    flower_port=FLOWER_PORT,
    flower_basic_auth=FLOWER_AUTH,
)


@pytest.fixture(scope="module")
def idp(signin_stack: E2EStack) -> Iterator[IdentityProvider]:
    with running_provider(signin_stack.tmp, port=IDP_PORT, resource=f"{PUBLIC_URL}/mcp") as p:
        yield p


def _wait(browser: webdriver.Chrome, script: str, *, timeout: float = 60) -> Any:
    return WebDriverWait(browser, timeout).until(lambda d: d.execute_script(f"return !!({script})"))


def sign_in(
    browser: webdriver.Chrome,
    user: str,
    *,
    page: str = "/dashboard",
    public_url: str = PUBLIC_URL,
    issuer: str = ISSUER,
) -> None:
    """Open ``page`` of the gateway at ``public_url`` as a stranger and sign in at the
    provider's own pages (``issuer``) as ``user``: the browser comes back to ``page``."""
    browser.delete_all_cookies()  # the gateway's and the provider's (one host, two ports)
    browser.get(public_url + page)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        WebDriverWait(browser, 30).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        url = browser.current_url  # read once: the browser may move on between two reads
        if url.startswith(public_url + page):
            break
        if not url.startswith(issuer):  # between the provider and the page: a redirect runs
            assert url.startswith(public_url), url
            time.sleep(0.2)
            continue
        try:
            logins = browser.find_elements(By.NAME, "login")
            if logins:
                logins[0].send_keys(user)
                browser.find_element(By.NAME, "password").send_keys("pw")
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        except WebDriverException:  # the provider's page moved on meanwhile: read it again
            continue
    WebDriverWait(browser, 30).until(lambda d: d.current_url.startswith(public_url + page))
    if page == "/dashboard":
        _wait(
            browser,
            "window.agentcards && agentcards.session.signedIn && document.body.dataset.rendered",
        )


def in_page(browser: webdriver.Chrome, method: str, path: str, body: Any = None, *,
            csrf: bool = True) -> tuple[int, Any]:  # fmt: skip
    """A request the dashboard's page makes with its session (and its CSRF token)."""
    status, text = browser.execute_async_script(
        """
        const [method, path, body, csrf, done] = arguments;
        const headers = {"Content-Type": "application/json"};
        if (csrf) headers["X-CSRF-Token"] = window.agentcards.session.csrf;
        fetch(path, {method, headers, body: body === null ? undefined : JSON.stringify(body)})
          .then(r => r.text().then(t => done([r.status, t])));
        """,
        method, path, body, csrf,
    )  # fmt: skip
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def session_cookie(browser: webdriver.Chrome) -> dict[str, Any]:
    found = [c for c in browser.get_cookies() if c["name"] == "agentcards_session"]
    assert len(found) == 1, browser.get_cookies()
    return found[0]


@pytest.fixture(scope="module")
def learned(signin_stack: E2EStack, idp: IdentityProvider, browser: webdriver.Chrome) -> str:
    """Alice signs in and runs code from the page; the capability it taught, by id."""
    sign_in(browser, "alice")
    status, run = in_page(browser, "POST", "/v1/executions?wait=true",
                          {"code": CODE, "intent": INTENT})  # fmt: skip
    assert status == 200 and run["status"] == "succeeded", run
    assert run["user_id"] == "alice"
    with signin_stack.db() as conn:
        wait_until(
            lambda: conn.execute(
                "SELECT id FROM capabilities WHERE tenant_id = 'acme' AND intent = %s", (INTENT,)
            ).fetchone(),
            what="the capability alice's run taught",
        )
        row = conn.execute("SELECT id FROM capabilities WHERE intent = %s", (INTENT,)).fetchone()
    assert row is not None
    return str(row["id"])


def test_a_person_signs_in_and_sees_their_name(
    signin_stack: E2EStack, idp: IdentityProvider, browser: webdriver.Chrome, artifacts: Path
) -> None:
    sign_in(browser, "alice")
    assert browser.find_element(By.ID, "user-name").text == "alice"
    assert browser.find_element(By.ID, "user").is_displayed()
    browser.save_screenshot(str(artifacts / "signed-in.png"))
    cookie = session_cookie(browser)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and not cookie["secure"]  # http
    assert browser.execute_script("return document.cookie").find("agentcards_session") < 0
    # Redis knows the session by the cookie's hash only; the cookie itself is stored nowhere.
    client = redis.Redis.from_url(signin_stack.settings.redis_url or "")
    digest = hashlib.sha256(cookie["value"].encode()).hexdigest()
    assert client.exists(SESSION_PREFIX + digest)
    stored = client.get(SESSION_PREFIX + digest) or b""
    assert cookie["value"].encode() not in stored and b"eyJ" not in stored  # no JWT kept


def test_provenance_names_the_person_whose_run_taught_it(
    learned: str, browser: webdriver.Chrome, artifacts: Path
) -> None:
    status, detail = in_page(browser, "GET", f"/v1/capabilities/{learned}")
    assert status == 200, detail
    assert [(p["user_id"], p["runs"]) for p in detail["learned_from"]] == [("alice", 1)]
    browser.execute_script("agentcards.openPanel(arguments[0])", learned)
    _wait(browser, "!document.querySelector('#cap-learners').hidden")
    assert browser.find_element(By.ID, "cap-learners").text == "learned from runs by alice (1)"
    browser.save_screenshot(str(artifacts / "provenance.png"))


def test_a_person_without_admin_cannot_use_admin_actions(
    learned: str, idp: IdentityProvider, browser: webdriver.Chrome
) -> None:
    sign_in(browser, "alice")  # engineers: read and execute, no admin
    browser.execute_script("agentcards.openPanel(arguments[0])", learned)
    _wait(browser, "!document.querySelector('#code-panel').hidden")
    for button in ("cap-save", "cap-toggle", "cap-delete"):
        assert not browser.find_element(By.ID, button).is_enabled(), button
    status, refused = in_page(browser, "PATCH", f"/v1/capabilities/{learned}", {"name": "mine"})
    assert status == 403 and "agentcards:admin" in refused["error"]["message"], refused
    sign_in(browser, "erin")  # admins
    assert browser.find_element(By.ID, "user-name").text == "erin"
    browser.execute_script("agentcards.openPanel(arguments[0])", learned)
    _wait(browser, "!document.querySelector('#code-panel').hidden")
    assert browser.find_element(By.ID, "cap-delete").is_enabled()
    status, renamed = in_page(browser, "PATCH", f"/v1/capabilities/{learned}",
                              {"name": "utc_now_for_signin"})  # fmt: skip
    assert status == 200 and renamed["name"] == "utc_now_for_signin", renamed


class _Attacker(BaseHTTPRequestHandler):
    """A page on another origin that posts to the gateway's ``target`` as soon as it loads."""

    target = "/v1/executions"

    def do_GET(self) -> None:
        page = f"""<!doctype html><html><body>
<form id="f" method="post" action="{PUBLIC_URL}{self.target}" enctype="text/plain">
<input type="hidden" name='{{"code": "return 1", "intent": "forged", "x": "' value='"}}'>
</form><script>document.getElementById("f").submit();</script></body></html>"""
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_a_forged_cross_site_post_is_refused(
    signin_stack: E2EStack, idp: IdentityProvider, browser: webdriver.Chrome
) -> None:
    sign_in(browser, "alice")
    forge(browser, "/v1/executions")
    # From the dashboard's own page, a write without the CSRF token is refused too.
    browser.get(f"{PUBLIC_URL}/dashboard")
    _wait(browser, "window.agentcards && agentcards.session.signedIn")
    status, refused = in_page(browser, "POST", "/v1/executions",
                              {"code": "return 1", "intent": "forged"}, csrf=False)  # fmt: skip
    assert status == 403 and "X-CSRF-Token" in refused["error"]["message"], refused
    with signin_stack.db() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM executions WHERE intent = 'forged'"
        ).fetchone()
    assert row is not None and row["n"] == 0


def forge(browser: webdriver.Chrome, target: str) -> None:
    """The signed-in browser visits a page elsewhere that posts to ``target``: refused."""
    attacker = type("Attacker", (_Attacker,), {"target": target})
    server = ThreadingHTTPServer(("127.0.0.1", 0), attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
        WebDriverWait(browser, 30).until(lambda d: d.current_url.startswith(PUBLIC_URL))
        assert "cross-site request forgery" in browser.page_source
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def flower(signin_stack: E2EStack) -> Iterator[Proc]:
    """Flower as `agentcards up` starts it when people sign in: on loopback, under /flower."""
    proc = signin_stack.start("flower", [
        sys.executable, "-m", "celery", "-A", "workers.learning.celery_app", "flower",
        f"--port={FLOWER_PORT}", "--address=127.0.0.1", "--url_prefix=flower",
        f"--basic-auth={FLOWER_AUTH}",
    ])  # fmt: skip

    def healthy() -> bool:
        try:
            url = f"http://127.0.0.1:{FLOWER_PORT}/flower/healthcheck"
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, what="Flower healthy", proc=proc)
    yield proc
    proc.stop()


def test_an_admin_opens_flower_through_the_gateway(
    signin_stack: E2EStack, idp: IdentityProvider, flower: Proc, browser: webdriver.Chrome,
    artifacts: Path,
) -> None:  # fmt: skip
    # A stranger opening Flower signs in first (erin: admins) and comes back to Flower.
    sign_in(browser, "erin", page="/flower/workers")

    def workers_listed(d: webdriver.Chrome) -> bool:
        d.get(f"{PUBLIC_URL}/flower/workers?refresh=1")
        return bool(d.find_elements(By.CSS_SELECTOR, "a.worker-name-link[title^='learning-']"))

    WebDriverWait(browser, 90, poll_frequency=2).until(workers_listed)
    assert "Flower" in browser.title and browser.current_url.startswith(f"{PUBLIC_URL}/flower/")
    # Its scripts came from the gateway and ran (its one inline script too, by its hash).
    assert browser.execute_script("return !!window.jQuery && typeof autorefresh === 'number'")
    refused = [
        e["message"] for e in browser.get_log("browser") if "Content Security" in e["message"]
    ]
    assert refused == []
    browser.save_screenshot(str(artifacts / "flower.png"))
    # Flower's own buttons write with the session, from the gateway's origin: they work.
    status, answer = in_page(browser, "POST", f"/flower/api/task/revoke/{uuid.uuid4()}",
                             csrf=False)  # fmt: skip
    assert status == 200 and "Revoked" in str(answer), answer
    # The dashboard links there (for admins).
    browser.get(f"{PUBLIC_URL}/dashboard")
    _wait(browser, "!document.querySelector('#flower-link').hidden")
    link = browser.find_element(By.ID, "flower-link").get_attribute("href")
    assert link == f"{PUBLIC_URL}/flower/"


def test_flower_is_for_admins_only(
    signin_stack: E2EStack, idp: IdentityProvider, flower: Proc, browser: webdriver.Chrome
) -> None:
    sign_in(browser, "alice")  # engineers: no agentcards:admin
    status, refused = in_page(browser, "GET", "/flower/")
    assert status == 403 and "agentcards:admin" in refused["error"]["message"], refused
    # A stranger's browser is sent to sign in, to come back to Flower after.
    stranger = httpx.get(f"{PUBLIC_URL}/flower/workers", follow_redirects=False)
    assert stranger.status_code == 303
    assert stranger.headers["location"] == "/dashboard/login?next=%2Fflower%2Fworkers"
    # A script: 401 without a key, Flower's API with an admin key (not with a plain one).
    assert httpx.get(f"{PUBLIC_URL}/flower/api/workers",
                     headers={"Authorization": "Bearer nope"}).status_code == 401  # fmt: skip
    with signin_stack.db() as conn:
        _, admin = issue_key(conn, tenant_id="acme", admin=True)
        _, plain = issue_key(conn, tenant_id="acme")
    ok = httpx.get(f"{PUBLIC_URL}/flower/api/workers", timeout=30,
                   headers={"Authorization": f"Bearer {admin}"})  # fmt: skip
    assert ok.status_code == 200 and isinstance(ok.json(), dict), ok.text
    no = httpx.get(f"{PUBLIC_URL}/flower/api/workers",
                   headers={"Authorization": f"Bearer {plain}"})  # fmt: skip
    assert no.status_code == 403


def test_a_forged_cross_site_post_to_flower_is_refused(
    signin_stack: E2EStack, idp: IdentityProvider, flower: Proc, browser: webdriver.Chrome
) -> None:
    found: list[str] = []  # the learning worker's node name, as Flower knows it

    def learning_worker() -> bool:
        url = f"http://127.0.0.1:{FLOWER_PORT}/flower/api/workers?refresh=1"
        user, password = FLOWER_AUTH.split(":")
        workers = httpx.get(url, auth=(user, password), timeout=30).json()
        found[:] = [name for name in workers if name.startswith("learning-")]
        return bool(found)

    wait_until(learning_worker, what="Flower knows the learning worker", proc=flower)
    shutdown = f"/flower/api/worker/shutdown/{found[0]}"
    sign_in(browser, "erin")  # an admin, whose session could shut the worker down
    forge(browser, shutdown)
    # A write that says nothing of where it comes from (no Origin, no Sec-Fetch-Site): refused.
    cookie = session_cookie(browser)["value"]
    bare = httpx.post(PUBLIC_URL + shutdown, cookies={"agentcards_session": cookie})
    assert bare.status_code == 403 and "cross-site" in bare.json()["error"]["message"]
    assert signin_stack.procs["learning"].proc.poll() is None  # the worker still runs


def test_signing_out_ends_the_session(
    signin_stack: E2EStack, idp: IdentityProvider, browser: webdriver.Chrome, artifacts: Path
) -> None:
    sign_in(browser, "alice")
    old = session_cookie(browser)["value"]
    browser.find_element(By.ID, "sign-out").click()
    # The provider asks to confirm its own sign-out, then sends the browser back.
    WebDriverWait(browser, 30).until(lambda d: d.current_url.startswith(ISSUER))
    browser.find_element(By.CSS_SELECTOR, "button[type=submit], button[name=logout]").click()
    WebDriverWait(browser, 30).until(
        lambda d: d.current_url == f"{PUBLIC_URL}/dashboard/signed-out"
    )
    assert browser.find_element(By.ID, "message").text.startswith("You are signed out")
    browser.save_screenshot(str(artifacts / "signed-out.png"))
    assert not [c for c in browser.get_cookies() if c["name"] == "agentcards_session"]
    refused = httpx.get(f"{PUBLIC_URL}/v1/executions", cookies={"agentcards_session": old})
    assert refused.status_code == 401 and "session has ended" in refused.json()["error"]["message"]
    # The provider's session ended too: the dashboard asks for a login again.
    browser.get(f"{PUBLIC_URL}/dashboard")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.NAME, "login"))
    assert browser.current_url.startswith(ISSUER)
