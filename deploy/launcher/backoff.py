"""Restart pacing for one supervised process: 1, 2, 4… s apart, back to 1 s once it has held up."""

from __future__ import annotations

from dataclasses import dataclass

MAX_BACKOFF_S = 30.0
# A process that ran this long before dying is not crash-looping: its next restart is
# immediate-ish (1 s) again, instead of carrying the delay of crashes minutes ago.
HEALTHY_RESET_S = 60.0


@dataclass
class Backoff:
    """When the next restart of one process is due; ``restarts`` counts them all (for display)."""

    restarts: int = 0
    streak: int = 0  # restarts since the process last stayed up HEALTHY_RESET_S
    started_at: float = 0.0
    next_start: float = 0.0  # 0 while no restart is pending

    def started(self, now: float) -> None:
        """The process was (re)started at ``now``."""
        self.started_at = now
        self.next_start = 0.0

    def exited(self, now: float) -> float | None:
        """The process is dead: schedule its restart; the delay when newly scheduled, else None."""
        if self.next_start:
            return None
        if now - self.started_at >= HEALTHY_RESET_S:
            self.streak = 0
        delay = min(MAX_BACKOFF_S, 2.0**self.streak)
        self.next_start = now + delay
        return delay

    def due(self, now: float) -> bool:
        """True when the scheduled restart should happen now (and counts it)."""
        if not self.next_start or now < self.next_start:
            return False
        self.restarts += 1
        self.streak += 1
        return True
