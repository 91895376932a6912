"""Runs nobody will finish: lost workers, hung runs, queued runs never taken; re-queued or ended."""
