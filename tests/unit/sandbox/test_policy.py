"""Host-side policy pieces: limits from settings, the seccomp program, the filesystem plan."""

from __future__ import annotations

import site

from shared.config import Settings
from shared.sandbox import fsplan, seccomp_policy
from shared.sandbox.limits import ADDRESS_SPACE_HEADROOM, SandboxLimits


def test_limits_from_settings_and_clamping() -> None:
    settings = Settings(sandbox_memory_mb=128, sandbox_max_wall_time_s=60)
    limits = SandboxLimits.from_settings(settings, wall_time_s=999)
    assert limits.memory_bytes == 128 << 20
    assert limits.wall_time_s == 60
    assert limits.rlimits()["as"] == (128 << 20) + ADDRESS_SPACE_HEADROOM
    assert limits.frame_bytes > limits.result_bytes
    assert SandboxLimits.from_settings(settings).wall_time_s == settings.sandbox_wall_time_s


def test_seccomp_program_compiles() -> None:
    bpf = seccomp_policy.compile_filter()
    assert bpf and len(bpf) % 8 == 0
    assert "socket" in seccomp_policy.DENIED_SYSCALLS and "ptrace" in seccomp_policy.DENIED_SYSCALLS


def test_plan_binds_stdlib_but_masks_site_packages() -> None:
    plan = fsplan.build_plan()
    bound = [b["dst"] for b in plan.binds]
    assert plan.executable in bound or any(plan.executable.startswith(p + "/") for p in bound)
    for sp in site.getsitepackages():
        assert sp not in bound
        covered = any(sp.startswith(p + "/") for p in bound)
        assert not covered or sp in plan.masks
