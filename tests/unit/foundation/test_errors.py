"""The failure vocabulary: stable wire names, one dict shape, and what the sandbox child may import."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from shared.errors import CHILD_ERRORS, TOOL_CALL_ERRORS, ErrorType, NotFound, error_dict

ROOT = Path(__file__).resolve().parents[3]


def test_wire_names_are_stable() -> None:
    assert {e.value for e in ErrorType} == {
        "tool_error", "timeout", "unknown_tool", "server_unavailable", "tool_not_allowed",
        "tool_call_limit", "tool_args_too_large", "rate_limited", "invalid_request",
        "internal_error",
        "runtime_error", "memory_limit", "cpu_limit", "output_limit", "capability_cycle",
        "capability_depth_exceeded", "protocol_error", "sandbox_unavailable", "cancelled",
        "worker_lost", "broker_unavailable", "lost", "validation_error", "invalid_json",
        "not_found", "conflict", "dependency_error", "config_error",
        "nesting_limit", "body_too_large", "method_not_allowed", "bad_request",
        "tool_unavailable", "queue_timeout", "store_failed", "unavailable",
        "unauthorized", "forbidden", "syntax_error", "result_not_json",
        "invalid_arguments", "capability_disabled", "policy_denied", "policy_invalid",
        "approval_denied", "approval_timeout", "approval_required", "approval_closed",
        "authorization_required",
    }  # fmt: skip


def test_a_child_cannot_claim_trusted_side_verdicts() -> None:
    assert TOOL_CALL_ERRORS <= CHILD_ERRORS
    for trusted in ("protocol_error", "sandbox_unavailable", "validation_error", "worker_lost"):
        assert trusted not in CHILD_ERRORS


def test_one_dict_shape() -> None:
    assert error_dict(ErrorType.TIMEOUT, "late", traceback=None) == {
        "type": "timeout",
        "message": "late",
    }
    assert NotFound("gone", id="x").to_dict() == {
        "type": "not_found",
        "message": "gone",
        "details": {"id": "x"},
    }


def test_the_sandbox_child_imports_the_stdlib_and_shared_errors_only() -> None:
    # The zygote runs `python -I -S` with no site-packages: a third-party import would break it.
    for path in [*sorted((ROOT / "shared/sandbox/child").glob("*.py")), ROOT / "shared/errors.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                allowed = (
                    top in sys.stdlib_module_names
                    or top == "__future__"
                    or name == "shared.errors"
                    or name.startswith("shared.sandbox.child")
                )
                assert allowed, f"{path.relative_to(ROOT)} imports {name}"
