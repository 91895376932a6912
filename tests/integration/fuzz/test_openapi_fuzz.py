"""Schemathesis over every operation in /openapi.json: no 5xx, every 4xx in our error envelope."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import schemathesis
from hypothesis import given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.integration.fuzz.conftest import FUZZ_SETTINGS, assert_gateway_survived
from tests.stack import E2EStack

# Per operation and generation mode (valid and invalid input): ~15 operations x 2 x 15
# examples is ~450 requests, one to two minutes on CI's two cores.
EXAMPLES = 15
# Live streams never complete, so a fuzzed request would hang until the test's timeout; their
# own tests cover them (tests/integration/capabilities/test_real_stack.py for /v1/events).
ENDLESS_STREAMS = frozenset({"GET /v1/events"})


def envelope_problem(status: int, body: bytes) -> str | None:
    """Why a 4xx body is not ``{"error": {"type": str, "message": str, ...}}``, else None."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return f"{status} body is not our error envelope: {body[:200]!r}"
    if not (isinstance(error.get("type"), str) and isinstance(error.get("message"), str)):
        return f"{status} error lacks a string type and message: {error!r}"
    return None


def test_every_operation_survives_fuzzing(
    fuzz_stack: E2EStack, caller_headers: dict[str, str]
) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_stack.gateway_url}/openapi.json")
    stats: Counter[str] = Counter()
    problems: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [op for op in operations if op.label not in ENDLESS_STREAMS]
    assert len(operations) >= 10, [op.label for op in operations]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzz(operation, mode, fuzz_stack.gateway_url, caller_headers, stats, problems)
            except Unsatisfiable:  # nothing to make invalid (an operation without input)
                assert mode is GenerationMode.NEGATIVE, operation.label
                stats["no_negative_cases"] += 1
    stats["operations"] = len(operations)
    print(f"\nschemathesis: {dict(stats)}")  # the summary CI logs show with -s / -rA
    assert stats["5xx"] == 0 and not problems, "\n".join(problems[:20])
    assert_gateway_survived(fuzz_stack)


def _fuzz(
    operation: Any,
    mode: GenerationMode,
    base_url: str,
    headers: dict[str, str],
    stats: Counter[str],
    problems: list[str],
) -> None:
    """EXAMPLES requests for one operation in one mode; 5xx and non-envelope 4xx go to problems."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
    def probe(case: Any) -> None:
        response = case.call(base_url=base_url, headers=headers, timeout=60)
        stats["examples"] += 1
        stats[f"{response.status_code // 100}xx"] += 1
        where = f"{case.method} {case.formatted_path} ({mode})"
        if response.status_code >= 500:
            problems.append(f"{where}: {response.status_code} {response.content[:300]!r}")
        elif response.status_code >= 400:
            problem = envelope_problem(response.status_code, response.content)
            if problem:
                problems.append(f"{where}: {problem}")

    probe()
