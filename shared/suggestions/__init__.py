"""Proactive suggestions: capabilities and tools related to what is in use."""

from shared.suggestions.engine import suggest
from shared.suggestions.feedback import mark_used, mark_used_many, record_shown, record_shown_many

__all__ = ["mark_used", "mark_used_many", "record_shown", "record_shown_many", "suggest"]
