"""Per-execution limits, read once from Settings so the worker and the CLI enforce the same numbers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from shared.config import Settings

# RLIMIT_AS counts every mapping (libpython, stdlib extension modules, thread stacks),
# not just the heap. This headroom keeps the interpreter itself from hitting the
# address-space cap; the cgroup still caps resident memory at memory_bytes exactly.
ADDRESS_SPACE_HEADROOM = 64 << 20
# V8 reserves (PROT_NONE, never resident) over 40 GiB of address space at start-up for its
# pointer cage and Oilpan's caged heap, and aborts when it cannot: under RLIMIT_AS this is
# the cap for a TypeScript child. Its memory is capped by the cgroup (resident, exact) and
# V8's own heap limit instead; a TypeScript run refuses to start without the cgroup.
DENO_ADDRESS_SPACE = 64 << 30

Language = Literal["python", "typescript"]
LANGUAGES: tuple[Language, ...] = ("python", "typescript")


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Every cap one execution runs under; see shared.config.Settings for the defaults."""

    wall_time_s: float = 30.0
    max_wall_time_s: float = 300.0  # the server's cap on wall_time_s, named in timeout errors
    cpu_time_s: int = 30
    memory_bytes: int = 256 << 20
    tmp_bytes: int = 16 << 20
    max_processes: int = 16
    max_open_files: int = 64
    stdout_bytes: int = 1 << 20
    result_bytes: int = 4 << 20
    max_tool_calls: int = 1000
    tool_args_bytes: int = 1 << 20
    tool_result_bytes: int = 4 << 20
    code_bytes: int = 256 << 10
    tool_call_timeout_s: float = 30.0
    degraded_ok: bool = False
    # How much time waiting for approvals does not count against ``wall_time_s`` (in all).
    approval_wait_cap_s: float = 3600.0

    @classmethod
    def from_settings(
        cls, settings: Settings, *, wall_time_s: float | None = None
    ) -> SandboxLimits:
        """Limits from Settings; ``wall_time_s`` (per request) is clamped to the configured maximum."""
        wall = settings.sandbox_wall_time_s if wall_time_s is None else wall_time_s
        return cls(
            wall_time_s=max(0.1, min(wall, settings.sandbox_max_wall_time_s)),
            max_wall_time_s=settings.sandbox_max_wall_time_s,
            cpu_time_s=settings.sandbox_cpu_time_s,
            memory_bytes=settings.sandbox_memory_mb << 20,
            tmp_bytes=settings.sandbox_tmp_mb << 20,
            max_processes=settings.sandbox_max_processes,
            max_open_files=settings.sandbox_max_open_files,
            stdout_bytes=settings.sandbox_stdout_bytes,
            result_bytes=settings.sandbox_result_bytes,
            max_tool_calls=settings.sandbox_max_tool_calls,
            tool_args_bytes=settings.sandbox_tool_args_bytes,
            tool_result_bytes=settings.sandbox_tool_result_bytes,
            code_bytes=settings.sandbox_code_bytes,
            tool_call_timeout_s=settings.tool_call_timeout_s,
            degraded_ok=settings.sandbox_degraded_ok,
            approval_wait_cap_s=settings.approval_wait_cap_s,
        )

    @property
    def frame_bytes(self) -> int:
        """Largest frame the bridge accepts from a child: a full result or tool call plus envelope."""
        return max(self.result_bytes, self.tool_args_bytes, 64 << 10) + (64 << 10)

    def rlimits(self) -> dict[str, int]:
        """The rlimit values the child applies to itself (see child.confine)."""
        return {
            "as": self.memory_bytes + ADDRESS_SPACE_HEADROOM,
            "cpu": self.cpu_time_s,
            "fsize": self.tmp_bytes,
            "nofile": self.max_open_files,
            "nproc": self.max_processes,
        }

    def deno_rlimits(self) -> dict[str, int]:
        """The rlimits of a TypeScript child: the same, but room for V8's address-space reservation."""
        return self.rlimits() | {"as": DENO_ADDRESS_SPACE}

    @property
    def v8_heap_mb(self) -> int:
        """V8's old-space limit: under the cgroup cap, so a heap bomb ends as V8's clean OOM report."""
        return max(16, (self.memory_bytes >> 20) - 96)
