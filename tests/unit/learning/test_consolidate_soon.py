"""When a tenant's consolidation runs after new runs: soon for a small tenant, never more
than a tenth of a core for a large one, never later than the beat."""

from __future__ import annotations

from shared.learning.consolidate import SOON_MAX_S, SOON_MIN_S, soon_delay


def test_a_tenant_never_consolidated_waits_the_minimum() -> None:
    assert soon_delay(None) == SOON_MIN_S == 5.0


def test_the_delay_is_ten_passes_long_between_the_bounds() -> None:
    assert soon_delay(0.05) == SOON_MIN_S  # a small tenant: a burst shares one pass
    assert soon_delay(3.0) == 30.0  # passes take at most a tenth of a core
    assert soon_delay(60.0) == SOON_MAX_S == 600.0  # 100k runs: the beat's own period
    assert soon_delay(600.0) == SOON_MAX_S
