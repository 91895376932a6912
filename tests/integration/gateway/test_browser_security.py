"""What a browser is told: CSP without inline script on HTML pages, nosniff, no framing, CORS off unless configured."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings

INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _directives(policy: str) -> dict[str, list[str]]:
    parts = [p.split() for p in policy.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


def test_the_dashboard_runs_no_inline_script_and_cannot_be_framed(client: TestClient) -> None:
    page = client.get("/dashboard")
    csp = _directives(page.headers["content-security-policy"])
    assert csp["script-src"] == ["'self'"] and csp["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in csp["style-src"]
    assert INLINE_SCRIPT.findall(page.text) == [] and "<style" not in page.text
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-frame-options"] == "DENY"
    for asset in ("/static/dashboard.js", "/static/dashboard.css"):
        response = client.get(asset)
        assert response.status_code == 200 and response.text.strip()
        assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_pages_allow_only_their_own_inline_script_by_hash(
    client: TestClient, path: str
) -> None:
    page = client.get(path)
    assert page.status_code == 200 and "/openapi.json" in page.text
    csp = _directives(page.headers["content-security-policy"])
    assert "'unsafe-inline'" not in csp["script-src"] and csp["frame-ancestors"] == ["'none'"]
    for script in INLINE_SCRIPT.findall(page.text):
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp["script-src"]


def test_json_responses_and_errors_say_nosniff(client: TestClient) -> None:
    for response in (client.get("/openapi.json"), client.get("/no/such/path")):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "content-security-policy" not in response.headers


def test_cors_is_off_by_default(client: TestClient) -> None:
    origin = {"origin": "https://evil.example"}
    preflight = client.options(
        "/v1/executions", headers=origin | {"access-control-request-method": "POST"}
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert "access-control-allow-origin" not in client.get("/v1/tools", headers=origin).headers


@pytest.fixture
def cors_client(settings: Settings) -> Iterator[TestClient]:
    configured = settings.model_copy(update={"cors_origins": "https://app.example, http://x:3000"})
    with TestClient(create_app(configured)) as test_client:
        yield test_client


def test_cors_allows_exactly_the_configured_origins(cors_client: TestClient) -> None:
    allowed = cors_client.options(
        "/v1/executions",
        headers={"origin": "http://x:3000", "access-control-request-method": "POST"},
    )
    assert allowed.headers["access-control-allow-origin"] == "http://x:3000"
    other = cors_client.get("/v1/tools", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    ok = cors_client.get("/v1/tools", headers={"origin": "https://app.example"})
    assert ok.headers["access-control-allow-origin"] == "https://app.example"


def test_a_cors_origin_that_is_not_an_origin_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="AGENTCARDS_CORS_ORIGINS"):
        Settings(cors_origins="https://ok.example,app.example/path", env="test")
