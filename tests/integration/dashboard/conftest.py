"""A real stack with 50+ learned capabilities, an API key, and a headless Chromium to look at it."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from shared.auth.store import issue_key
from shared.db import connect
from tests.integration.mcp_servers import example_server, time_server
from tests.stack import REPO, E2EStack, stack_fixture, wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"  # Debian's: Selenium Manager never downloads a driver
ARTIFACTS = Path(os.environ.get("AGENTCARDS_ARTIFACTS", REPO / ".artifacts")) / "dashboard"
LEARNED = 52

dash = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})


def capability_code(i: int) -> str:
    """The i-th distinct program: five tool mixes over two real servers, each with its own literal."""
    steps = [
        f'total = await mcp.example.add(a=args.get("x", 1), b={i})',
        f"product = await mcp.example.multiply(a={i}, b=2)",
        'now = await mcp.time.get_current_time(timezone="UTC")',
        "notes = await mcp.example.list_notes()",
        f"ratio = await mcp.example.divide(a={i}, b=4)",
    ]
    picked = [steps[j] for j in range(5) if (i >> j) & 1 or j == i % 5]
    names = [s.split(" =")[0] for s in picked]
    return "\n".join([*picked, f"return {{'step': {i}, 'parts': {names!r}}}"])


def run(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/executions", params={"wait": "true"}, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert result["status"] == "succeeded", result
    return result


@pytest.fixture(scope="module")
def stack(dash: E2EStack) -> Iterator[tuple[E2EStack, dict[str, str]]]:
    """The stack, with an API key issued first (the page must work with keys on), then
    LEARNED capabilities learned from real runs, four at a time."""
    with connect(dash.settings.database_url or "") as conn:
        _, key = issue_key(conn, tenant_id="acme", name="dashboard-test")
        conn.commit()
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=dash.gateway_url, timeout=120, headers=auth) as client:
        bodies = [
            {"code": capability_code(i), "intent": f"dashboard step {i}: combine tool results"}
            for i in range(LEARNED)
        ]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda b: run(client, b), bodies))
    assert all(r["capability"] for r in results)
    with dash.db() as conn:
        wait_until(
            lambda: (
                conn.execute(
                    "SELECT count(*) AS n FROM capabilities WHERE tenant_id = 'acme'"
                ).fetchone()["n"]  # type: ignore[index]
                >= LEARNED
            ),
            what=f"{LEARNED} capabilities",
        )
    yield dash, auth


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    """Headless Debian Chromium with a fresh profile; nothing phones home."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            f"{CHROMIUM} or {CHROMEDRIVER} missing: apt-get install chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--window-size=1600,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (printed, so a CI log says where to find them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {ARTIFACTS}")
    return ARTIFACTS
