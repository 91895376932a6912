"""The identity file (claims → principal), DPoP proofs and the scope each request needs."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from services.gateway.scopes import mcp_scope, rest_scope
from shared.auth.dpop import check_proof
from shared.auth.identity import Claims, load_identity, principal_for
from shared.auth.limits import limited
from shared.errors import ConfigError, Forbidden, Unauthorized

IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "default_tenant": "acme",
    "groups": {
        "engineers": {"tools": ["time:*"], "scopes": ["agentcards:read", "agentcards:execute"],
                      "rate_limit_per_min": 60},
        "admins": {"scopes": ["agentcards:read", "agentcards:admin"], "rate_limit_per_min": 600},
    },
}  # fmt: skip
ALL = frozenset({"agentcards:read", "agentcards:execute", "agentcards:admin"})


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "identity.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def claims(sub: str = "alice", scopes: frozenset[str] = ALL, **more: Any) -> Claims:
    return Claims(subject=sub, scopes=scopes, claims={"sub": sub, **more})


def test_groups_map_to_tools_scopes_and_limits(tmp_path: Path) -> None:
    config = load_identity(write(tmp_path, IDENTITY))
    alice = principal_for(config, claims(org="globex", groups=["engineers"]))
    assert (alice.tenant_id, alice.user) == ("globex", "alice")
    assert alice.tool_patterns == ("time:*",)
    assert alice.scopes == {"agentcards:read", "agentcards:execute"}
    assert alice.executions_per_min == 60 and not alice.admin
    assert limited(alice) and alice.limit_id == "user:globex:alice"


def test_several_groups_give_the_union_and_the_most_generous_limit(tmp_path: Path) -> None:
    config = load_identity(write(tmp_path, IDENTITY))
    erin = principal_for(config, claims("erin", groups=["admins", "engineers"]))
    assert erin.scopes == ALL and erin.admin
    assert erin.executions_per_min == 600
    assert erin.tenant_id == "acme"  # no org claim: the default tenant


def test_the_token_narrows_what_the_groups_grant(tmp_path: Path) -> None:
    config = load_identity(write(tmp_path, IDENTITY))
    reader = principal_for(config, claims(scopes=frozenset({"agentcards:read"}), groups=["admins"]))
    assert reader.scopes == {"agentcards:read"} and not reader.admin


def test_a_user_in_no_mapped_group_gets_the_least(tmp_path: Path) -> None:
    config = load_identity(write(tmp_path, IDENTITY))
    for groups in (["visitors"], [], None):
        nobody = principal_for(config, claims(groups=groups))
        assert nobody.scopes == frozenset() and nobody.tool_patterns == () and not nobody.admin


def test_no_tenant_anywhere_is_refused(tmp_path: Path) -> None:
    config = load_identity(write(tmp_path, {"groups": {}}))
    with pytest.raises(Forbidden, match="no organisation"):
        principal_for(config, claims())


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ("{not json", "not JSON"),
        (
            {"groups": {"eng": {"scopes": ["agentcards:write"]}}},
            "at groups.eng.scopes: unknown scope",
        ),
        ({"groups": {"eng": {"tools": ["no colon"]}}}, "at groups.eng.tools: invalid tool pattern"),
        ({"groups": {"eng": {"rate_limit_per_min": 0}}}, "at groups.eng.rate_limit_per_min"),
        ({"tenant": "acme"}, "at tenant: Extra inputs are not permitted"),
        ({"default_tenant": "a b"}, "at default_tenant: invalid tenant"),
    ],
)
def test_a_bad_identity_file_is_named_with_its_path_and_reason(
    tmp_path: Path, data: Any, where: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as refused:
        load_identity(path)
    assert str(path) in str(refused.value) and where in str(refused.value)


def test_a_missing_identity_file_is_named() -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        load_identity(Path("/nonexistent/identity.json"))


KEY = ECKey.generate_key("P-256")
TOKEN = "the-access-token"
URL = "https://gateway.example.com/mcp"


def proof(key: ECKey = KEY, **claims: Any) -> str:
    ath = base64.urlsafe_b64encode(hashlib.sha256(TOKEN.encode()).digest()).rstrip(b"=").decode()
    body = {"htm": "POST", "htu": URL, "iat": int(time.time()), "jti": uuid.uuid4().hex,
            "ath": ath} | claims  # fmt: skip
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
    return jwt.encode(header, {k: v for k, v in body.items() if v is not None}, key)


def check(value: str | None, seen: set[str] | None = None) -> None:
    used = set() if seen is None else seen

    def first_use(jti: str, ttl_s: int) -> bool:
        new = jti not in used
        used.add(jti)
        return new

    check_proof(value, method="POST", url=URL + "?x=1", access_token=TOKEN,
                jkt=KEY.thumbprint(), first_use=first_use)  # fmt: skip


def test_a_valid_dpop_proof_is_accepted_once() -> None:
    value, seen = proof(), set[str]()
    check(value, seen)
    with pytest.raises(Unauthorized, match="used before"):
        check(value, seen)


@pytest.mark.parametrize(
    ("make", "reason"),
    [  # made when the test runs, not at collection: a proof is fresh for a minute only
        (lambda: None, "DPoP-bound"),
        (lambda: proof(htm="GET"), "another request"),
        (lambda: proof(htu="https://gateway.example.com/v1/executions"), "another request"),
        (lambda: proof(ath="x"), "another access token"),
        (lambda: proof(iat=int(time.time()) - 3600), "not fresh"),
        (lambda: proof(jti=None), "no jti"),
        (lambda: proof(ECKey.generate_key("P-256")), "another key"),
        (lambda: "not.a.proof", "does not verify"),
    ],
    ids=["none", "method", "url", "ath", "stale", "no-jti", "other-key", "garbage"],  # stable
)
def test_a_bad_dpop_proof_is_refused(make: Callable[[], str | None], reason: str) -> None:
    value = make()
    with pytest.raises(Unauthorized, match=reason):
        check(value)


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("GET", "/v1/executions", "agentcards:read"),
        ("POST", "/v1/tools/search", "agentcards:read"),
        ("POST", "/v1/capabilities/search", "agentcards:read"),
        ("POST", "/v1/executions", "agentcards:execute"),
        ("POST", "/v1/executions/abc/cancel", "agentcards:execute"),
        ("POST", "/v1/capabilities/abc/execute", "agentcards:execute"),
        ("POST", "/v1/capabilities", "agentcards:admin"),
        ("PATCH", "/v1/capabilities/abc", "agentcards:admin"),
        ("DELETE", "/v1/cache", "agentcards:admin"),
        ("POST", "/v1/pii/resolve", "agentcards:admin"),
        ("GET", "/v1/audit", "agentcards:admin"),
    ],
)
def test_each_rest_route_needs_its_scope(method: str, path: str, scope: str) -> None:
    assert rest_scope(method, path) == scope


def test_an_mcp_call_needs_execute_only_to_run_something() -> None:
    def call(name: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}

    assert (
        mcp_scope(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode())
        == "agentcards:read"
    )
    assert mcp_scope(json.dumps(call("search_tools")).encode()) == "agentcards:read"
    assert mcp_scope(json.dumps(call("execute_code")).encode()) == "agentcards:execute"
    assert mcp_scope(json.dumps(call("time.get_current_time")).encode()) == "agentcards:execute"
    batch = [call("search_tools"), call("execute_capability")]
    assert mcp_scope(json.dumps(batch).encode()) == "agentcards:execute"
