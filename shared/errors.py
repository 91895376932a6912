"""The failure vocabulary and the small exception tree: every error that crosses a boundary is ``{type, message}``.

Stdlib only: the sandbox child imports this module (its interpreter has no site-packages).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorType(StrEnum):
    """Why something failed: the ``type`` of every structured error; stable wire names callers branch on."""

    # A tool call (RPC replies, the bridge's refusals, ToolCallError.type in agent code).
    TOOL_ERROR = "tool_error"  # the MCP server answered with isError=true, or the call broke
    TIMEOUT = "timeout"  # a deadline passed (tool call: before pickup, during, or reply lost)
    UNKNOWN_TOOL = "unknown_tool"  # no configured server offers this tool id
    SERVER_UNAVAILABLE = "server_unavailable"  # the server is down or died mid-call
    TOOL_NOT_ALLOWED = "tool_not_allowed"  # outside the execution's tool scope
    TOOL_CALL_LIMIT = "tool_call_limit"  # more calls than the execution may make
    TOOL_ARGS_TOO_LARGE = "tool_args_too_large"  # arguments over the size limit
    # Missing required, unknown or mistyped arguments for the tool's input schema (checked
    # before the call; the message names them and lists the valid ones).
    INVALID_ARGUMENTS = "invalid_arguments"
    RATE_LIMITED = (
        "rate_limited"  # a key's executions/min, concurrency or tool calls/min is reached
    )
    INVALID_REQUEST = "invalid_request"  # the RPC request itself is malformed
    INTERNAL_ERROR = "internal_error"  # a bug or an infrastructure failure (Redis down)
    # The toolhost serving the call died or the RPC channel broke mid-call: the call may
    # have run, and it is never replayed (at most once).
    TOOL_UNAVAILABLE = "tool_unavailable"
    # The policy file (docs/policy.md) decided against the call; details: ``policies``, the
    # ids of the policies that decided (empty: no policy permits it).
    POLICY_DENIED = "policy_denied"
    # A permit annotated @approval("required") decided the call and nobody approved it:
    # an approver denied it (the message says who and why), or nobody answered in time.
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_TIMEOUT = "approval_timeout"
    # Between the toolhost and the caller only (never in agent code): the call waits for a
    # person; details: the approval's ``call_id`` and ``expires_at``.
    APPROVAL_REQUIRED = "approval_required"
    # The server acts for the person calling and has no credential of theirs: a call with an
    # API key (no person), or the person's credential was refused (docs/upstream-identity.md).
    AUTHORIZATION_REQUIRED = "authorization_required"
    # An execution (the sandbox outcome; the child may claim only CHILD_ERRORS).
    RUNTIME_ERROR = "runtime_error"  # agent code raised
    SYNTAX_ERROR = "syntax_error"  # agent code does not compile (details: line, column)
    RESULT_NOT_JSON = "result_not_json"  # the result holds a set, bytes, NaN... (details: path)
    MEMORY_LIMIT = "memory_limit"
    CPU_LIMIT = "cpu_limit"
    OUTPUT_LIMIT = "output_limit"  # result or stdout over its size limit
    CAPABILITY_CYCLE = "capability_cycle"  # inline capabilities: A -> B -> A
    CAPABILITY_DEPTH_EXCEEDED = "capability_depth_exceeded"  # nested past the depth limit
    PROTOCOL_ERROR = "protocol_error"  # the child sent a malformed frame
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # an isolation layer failed: fail closed
    CANCELLED = "cancelled"
    WORKER_LOST = "worker_lost"  # the worker running it died
    QUEUE_TIMEOUT = "queue_timeout"  # queued too long without a worker; it never ran
    STORE_FAILED = "store_failed"  # the worker could not record the outcome (database/broker)
    BROKER_UNAVAILABLE = "broker_unavailable"  # the execution could not be queued
    LOST = "lost"  # a tool call with a recorded start and no end
    # A request to the gateway or a service.
    VALIDATION_ERROR = "validation_error"  # a field is wrong (NUL in text, wrong type...)
    INVALID_JSON = "invalid_json"
    NESTING_LIMIT = "nesting_limit"  # JSON nested deeper than the cap, refused before parsing
    BODY_TOO_LARGE = "body_too_large"  # a request body over the cap, refused before reading it all
    NOT_FOUND = "not_found"  # no such execution, capability, or path
    METHOD_NOT_ALLOWED = "method_not_allowed"
    BAD_REQUEST = "bad_request"  # any other malformed HTTP request
    CONFLICT = "conflict"
    CAPABILITY_DISABLED = "capability_disabled"  # an operator disabled it: enable it to run it
    UNAUTHORIZED = "unauthorized"  # no API key, or an unknown or revoked one
    FORBIDDEN = "forbidden"  # the key is valid but may not do this (admin-only routes)
    DEPENDENCY_ERROR = "dependency_error"
    CONFIG_ERROR = "config_error"
    # An answer to an approval that is no longer open (answered already, expired, its run over).
    APPROVAL_CLOSED = "approval_closed"
    POLICY_INVALID = "policy_invalid"  # a policy file that does not parse or validate (file, line)
    UNAVAILABLE = "unavailable"  # a dependency (Redis, Postgres) is down: retry after a pause


# What a tool call may end with; the bridge passes these to agent code and the trace as
# they came (any other type from a backend becomes tool_error).
TOOL_CALL_ERRORS = frozenset(
    {
        ErrorType.TOOL_ERROR,
        ErrorType.TIMEOUT,
        ErrorType.UNKNOWN_TOOL,
        ErrorType.SERVER_UNAVAILABLE,
        ErrorType.TOOL_NOT_ALLOWED,
        ErrorType.TOOL_CALL_LIMIT,
        ErrorType.TOOL_ARGS_TOO_LARGE,
        ErrorType.INVALID_ARGUMENTS,
        ErrorType.RATE_LIMITED,
        ErrorType.INVALID_REQUEST,
        ErrorType.INTERNAL_ERROR,
        ErrorType.TOOL_UNAVAILABLE,
        ErrorType.POLICY_DENIED,
        ErrorType.APPROVAL_DENIED,
        ErrorType.APPROVAL_TIMEOUT,
        ErrorType.AUTHORIZATION_REQUIRED,
    }
)

# What an untrusted child may claim about its own failure (its ``done`` frame, a capability
# end): its own limits, capability refusals, or a tool call's failure it did not catch. The
# bridge alone decides the status (a wall-time ``timeout`` status is never the child's say)
# and the trusted-side types (protocol_error, sandbox_unavailable).
CHILD_ERRORS = TOOL_CALL_ERRORS | {
    ErrorType.RUNTIME_ERROR,
    ErrorType.SYNTAX_ERROR,
    ErrorType.RESULT_NOT_JSON,
    ErrorType.MEMORY_LIMIT,
    ErrorType.CPU_LIMIT,
    ErrorType.OUTPUT_LIMIT,
    ErrorType.CAPABILITY_CYCLE,
    ErrorType.CAPABILITY_DEPTH_EXCEEDED,
}


def error_dict(type_: str, message: str, **details: Any) -> dict[str, Any]:
    """The structured error ``{"type", "message", **details}``; details that are None are left out."""
    return {
        "type": str(type_),
        "message": message,
        **{k: v for k, v in details.items() if v is not None},
    }


class AgentCardsError(Exception):
    """Raised for any failure AgentCards itself reports; ``type`` is the wire name."""

    type = ErrorType.INTERNAL_ERROR

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """Structured form for HTTP, MCP and sandbox replies."""
        return error_dict(self.type, self.message, details=self.details or None)


class ConfigError(AgentCardsError):
    """Raised when settings or a config file are invalid; the message says what to fix."""

    type = ErrorType.CONFIG_ERROR


class DependencyError(AgentCardsError):
    """Raised when Postgres, Redis or another required server is unreachable or unfit."""

    type = ErrorType.DEPENDENCY_ERROR


class Unavailable(DependencyError):
    """Raised when a dependency a request needs is down right now: retry after a pause."""

    type = ErrorType.UNAVAILABLE


class CacheInvalidationFailed(DependencyError):
    """Raised when cached results a write made stale could be neither invalidated nor blocked."""


class ValidationFailed(AgentCardsError):
    """Raised when client input is rejected before anything is recorded."""

    type = ErrorType.VALIDATION_ERROR


class NestingTooDeep(ValidationFailed):
    """Raised when a JSON body or value nests deeper than its cap (the sandbox's wire limit)."""

    type = ErrorType.NESTING_LIMIT


class BodyTooLarge(AgentCardsError):
    """Raised when a request body is larger than any valid request could be."""

    type = ErrorType.BODY_TOO_LARGE


class NotFound(AgentCardsError):
    """Raised when an execution, tool or capability id does not exist."""

    type = ErrorType.NOT_FOUND


class Conflict(AgentCardsError):
    """Raised when a request contradicts the current state (cancelling a finished execution)."""

    type = ErrorType.CONFLICT


class LastActiveKey(Conflict):
    """Raised when revoking a key would leave none active (the gateway would then serve
    loopback callers without a key) and the caller did not say to go ahead."""


class CapabilityDisabled(Conflict):
    """Raised when running a capability an operator disabled (409)."""

    type = ErrorType.CAPABILITY_DISABLED


class Unauthorized(AgentCardsError):
    """Raised when a request carries no valid API key and the gateway requires one."""

    type = ErrorType.UNAUTHORIZED


class Forbidden(AgentCardsError):
    """Raised when a valid key asks for something it may not do (an admin-only route)."""

    type = ErrorType.FORBIDDEN


class RateLimited(AgentCardsError):
    """Raised when a key is over one of its limits; ``retry_after_s`` says when to try again."""

    type = ErrorType.RATE_LIMITED

    def __init__(self, message: str, *, retry_after_s: int, **details: Any) -> None:
        super().__init__(message, retry_after_s=retry_after_s, **details)
        self.retry_after_s = retry_after_s


class SandboxError(AgentCardsError):
    """Raised when the sandbox cannot be set up (an isolation layer failed: fail closed)."""

    type = ErrorType.SANDBOX_UNAVAILABLE


class ToolNotAllowed(AgentCardsError):
    """Raised when a request names only tools outside the caller's allow-list."""

    type = ErrorType.TOOL_NOT_ALLOWED


class AuthorizationRequired(AgentCardsError):
    """Raised when a server acts for the person calling and cannot for this caller: an API
    key, or a person who has not connected it (details: ``url``, their connect link)."""

    type = ErrorType.AUTHORIZATION_REQUIRED


class PolicyDenied(AgentCardsError):
    """Raised when the policy file decides against a call or a submission (details: ``policies``)."""

    type = ErrorType.POLICY_DENIED


class ApprovalClosed(Conflict):
    """Raised when an approval is answered after it closed: answered already (the first
    answer stands), expired, or its run is over (409)."""

    type = ErrorType.APPROVAL_CLOSED


class PolicyInvalid(ConfigError):
    """Raised when a policy file does not parse or does not validate against the shipped
    schema (details: ``file``, ``line``, ``reason``)."""

    type = ErrorType.POLICY_INVALID


class ToolError(AgentCardsError):
    """Raised when a tool call fails; ``type`` distinguishes why (see ErrorType)."""

    type = ErrorType.TOOL_ERROR
