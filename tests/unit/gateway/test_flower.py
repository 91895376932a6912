"""Flower behind the gateway's sign-in: what reaches Flower, which writes pass, where a
sign-in returns to, and the policy Flower's pages get."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from deploy.launcher.processes import stack_specs
from deploy.launcher.supervisor import Stack
from services.gateway.flower import FLOWER_CSP, FlowerProxy
from services.gateway.oauth import ResourceServer
from services.gateway.security_headers import STRICT_CSP, SecurityHeaders
from services.gateway.signin import SignIn, _local
from shared.config import Settings
from shared.errors import ConfigError, Forbidden

PUBLIC = "https://gw.example.com"


def _settings(**overrides: object) -> Settings:
    return Settings(  # type: ignore[arg-type]
        env="test", oauth_issuer="https://idp.example.com", public_url=PUBLIC,
        oauth_client_id="gateway", **overrides,
    )  # fmt: skip


def _request(method: str = "GET", path: str = "/flower/", **headers: str) -> Request:
    raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": method, "path": path, "headers": raw})


def test_flower_gets_its_own_password_and_never_the_gateways_credentials() -> None:
    sign_in = SignIn(_settings(), ResourceServer(_settings()))
    proxy = FlowerProxy(_settings(flower_basic_auth="ops:pw"), gateway_cookies=sign_in.cookies)
    sent = dict(
        proxy._request_headers(
            _request(
                host="gw.example.com",
                authorization="Bearer the-callers-key",
                cookie="__Host-agentcards_session=s3cret; _xsrf=2|ab|cd; __Host-agentcards_signin=x",
                connection="keep-alive",
            )
        )
    )
    assert sent["authorization"] == "Basic " + base64.b64encode(b"ops:pw").decode()
    assert sent["cookie"] == "_xsrf=2|ab|cd"  # Flower's own cookie only
    assert sent["host"] == "gw.example.com"  # Flower compares the browser's Origin with it
    assert "connection" not in sent
    # Without a Flower password, no Authorization header at all; without cookies left, no Cookie.
    bare = FlowerProxy(_settings(), gateway_cookies=sign_in.cookies)
    alone = dict(bare._request_headers(_request(cookie="__Host-agentcards_session=s3cret")))
    assert "authorization" not in alone and "cookie" not in alone
    assert bare.upstream == "http://127.0.0.1:5555"
    assert FlowerProxy(_settings(flower_upstream="http://flower:5555/"),
                       gateway_cookies=sign_in.cookies).upstream == "http://flower:5555"  # fmt: skip


def test_a_cookie_borne_write_to_flower_must_come_from_the_gateways_origin() -> None:
    sign_in = SignIn(_settings(), ResourceServer(_settings()))
    sign_in.check_origin(_request("POST", origin=PUBLIC), required=True)
    sign_in.check_origin(_request("POST", sec_fetch_site="same-origin"), required=True)
    for headers in ({"origin": "https://evil.example"}, {"sec_fetch_site": "same-site"},
                    {"sec_fetch_site": "cross-site", "origin": PUBLIC}):  # fmt: skip
        with pytest.raises(Forbidden, match="cross-site request forgery"):
            sign_in.check_origin(_request("POST", **headers), required=True)
    with pytest.raises(Forbidden, match="Origin or Sec-Fetch-Site"):
        sign_in.check_origin(_request("POST"), required=True)
    sign_in.check_origin(_request("POST"))  # the dashboard's writes carry the CSRF token too


def test_signing_in_returns_to_flower_the_dashboard_or_a_connect_link_only() -> None:
    assert _local("/flower/workers?refresh=1") == "/flower/workers?refresh=1"
    assert _local("/dashboard?panel=x") == "/dashboard?panel=x"
    assert _local("/oauth/connect/Ab-9_x") == "/oauth/connect/Ab-9_x"
    for elsewhere in ("//evil.example/flower/", "https://evil.example/", "/flowerbed", "/v1/x",
                      "/oauth/connect/", "/oauth/connect/a/../../v1", "/oauth/callback"):  # fmt: skip
        assert _local(elsewhere) == "/dashboard"


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    return None


def test_flowers_pages_get_their_own_policy_and_the_rest_keep_theirs() -> None:
    headers = SecurityHeaders(_nothing, page_policies={"/docs": "docs", "/flower/": FLOWER_CSP})
    assert headers.policy("/flower/workers") == FLOWER_CSP
    assert headers.policy("/docs") == "docs"
    assert headers.policy("/flowerbed") == headers.policy("/dashboard") == STRICT_CSP
    assert "'unsafe-inline'" not in FLOWER_CSP.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in FLOWER_CSP


def test_up_starts_flower_under_the_prefix_with_a_password_when_people_sign_in() -> None:
    stack = Stack(_settings(flower_port=5599))
    flower = next(s for s in stack_specs(stack.settings) if s.name == "flower")
    assert "--url_prefix=flower" in flower.argv and flower.url == f"{PUBLIC}/flower/"
    password = stack.settings.flower_basic_auth
    assert password is not None  # the gateway sends it; nobody else on the machine knows it
    assert f"--basic-auth={password.get_secret_value()}" in flower.argv
    # Nobody signs in: Flower as before, on its own port, without a prefix or a password.
    plain = next(
        s for s in stack_specs(Settings(env="test", flower_port=5599)) if s.name == "flower"
    )
    assert plain.url == "http://127.0.0.1:5599"
    assert not [a for a in plain.argv if a.startswith(("--url_prefix", "--basic-auth"))]


def test_a_stack_for_one_session_runs_without_flower_and_beat_and_refuses_unknown_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[str] = []
    monkeypatch.setattr(Stack, "_spawn", lambda self, child: spawned.append(child.spec.name))
    monkeypatch.setattr(Stack, "save_state", lambda self: None)
    settings = Settings(env="test", home=tmp_path)
    Stack(settings, without=("beat", "flower")).start_processes()  # the demo's temporary stack
    assert spawned == ["gateway", "toolhost", "sandbox-worker", "learning-worker"]
    with pytest.raises(ConfigError, match="no such stack process: flowers"):
        Stack(settings, without=("flowers",)).start_processes()
