"""`agentcards bench auth` runs and reports each kind of request it times (a smoke test)."""

from __future__ import annotations

from deploy.bench import auth


def test_the_auth_bench_times_every_kind_of_request() -> None:
    result = auth.run(n=20)
    kinds = set(result["per_request"])
    assert {"no_token_auth_off", "api_key_cached", "jwt_es256_checked_every_request",
            "jwt_es256_from_token_cache", "dpop_es256_with_fresh_proof"} <= kinds  # fmt: skip
    assert all(v["p50_us"] > 0 for v in result["per_request"].values())
