"""The metrics strip's pure parts: the Flower link and the cache hit rate."""

from __future__ import annotations

from services.gateway.ops.metrics_summary import cache_hit_rate, flower_url
from shared.config import Settings


def _settings(**overrides: object) -> Settings:
    return Settings(env="test", flower_port=5599, **overrides)  # type: ignore[arg-type]


def test_flower_is_on_the_host_the_caller_used() -> None:
    assert flower_url(_settings(), host="dash.example.com:8420") == "http://dash.example.com:5599"
    assert flower_url(_settings(), host="[::1]:8420") == "http://[::1]:5599"


def test_without_a_host_header_the_bind_address_is_used_never_a_wildcard() -> None:
    assert flower_url(_settings(gateway_host="10.0.0.5"), host=None) == "http://10.0.0.5:5599"
    assert flower_url(_settings(gateway_host="0.0.0.0"), host=None) == "http://127.0.0.1:5599"


def test_an_explicit_flower_url_wins_and_off_means_no_link() -> None:
    explicit = _settings(flower_url="https://flower.internal/")
    assert flower_url(explicit, host="x:1") == "https://flower.internal/"
    assert flower_url(_settings(flower_url="off"), host="x:1") is None


def test_with_people_signing_in_flower_is_the_gateways_own_flower_page() -> None:
    signin = {"oauth_issuer": "https://idp.example", "public_url": "https://gw.example/",
              "oauth_client_id": "gateway"}  # fmt: skip
    assert flower_url(_settings(**signin), host="x:1") == "https://gw.example/flower/"
    assert flower_url(_settings(**signin, flower_url="off"), host="x:1") is None
    # An issuer without a client id signs nobody in: Flower stays on its own port.
    assert flower_url(_settings(oauth_issuer="https://idp.example",
                                public_url="https://gw.example"), host="x:1") == "http://x:5599"  # fmt: skip


def _levels(**counts: tuple[int, int]) -> dict[str, dict[str, int]]:
    out = {level: {"hits": 0, "misses": 0} for level in ("execution", "capability", "intent")}
    for level, (hits, misses) in counts.items():
        out[level] = {"hits": hits, "misses": misses}
    return out


def test_hit_rate_counts_each_submission_once() -> None:
    assert cache_hit_rate(_levels()) is None
    # 4 plain runs: 1 L1 hit, 3 L1 misses, of which L3 answered 1 and missed 2.
    assert cache_hit_rate(_levels(execution=(1, 3), intent=(1, 2))) == 0.5
    assert cache_hit_rate(_levels(capability=(3, 1))) == 0.75
