"""Arguments orjson cannot encode still get a cache key (a 500 under fuzzing before)."""

from __future__ import annotations

from shared.cache.keys import execution_digest, params_hash


def test_an_integer_beyond_64_bits_gets_a_stable_key() -> None:
    big = {"n": 2**70, "a": [1, 2]}
    assert params_hash(big) == params_hash({"a": [1, 2], "n": 2**70})
    assert params_hash(big) != params_hash({"n": 2**70 + 1, "a": [1, 2]})
    assert execution_digest(code="return 1", args=big, scope="s")
