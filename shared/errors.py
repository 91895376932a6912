"""The small exception tree. Errors that cross a boundary carry a stable ``type``."""

from __future__ import annotations

from typing import Any


class AgentCardsError(Exception):
    """Raised for any failure AgentCards itself reports; ``type`` is the wire name."""

    type = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """Structured form for HTTP, MCP and sandbox replies."""
        out: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


class ConfigError(AgentCardsError):
    """Raised when settings or a config file are invalid; the message says what to fix."""

    type = "config_error"


class DependencyError(AgentCardsError):
    """Raised when Postgres, Redis or another required server is unreachable or unfit."""

    type = "dependency_error"


class ValidationFailed(AgentCardsError):
    """Raised when client input is rejected before anything is recorded."""

    type = "validation_error"


class NotFound(AgentCardsError):
    """Raised when an execution, tool or capability id does not exist."""

    type = "not_found"


class Conflict(AgentCardsError):
    """Raised when a request contradicts the current state (cancelling a finished execution)."""

    type = "conflict"


class SandboxError(AgentCardsError):
    """Raised when the sandbox cannot be set up (an isolation layer failed: fail closed)."""

    type = "sandbox_unavailable"


class ToolError(AgentCardsError):
    """Raised when a tool call fails; ``type`` distinguishes why (see shared.rpc)."""

    type = "tool_error"
