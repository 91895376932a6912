"""Events the toolhost publishes on ``TOOLS_CHANGED_CHANNEL`` (the cache listens to them)."""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict


class ToolSchemaChanged(BaseModel):
    """A tool's input schema changed, or the tool vanished (``new_hash`` is None)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["tool_schema_changed"] = "tool_schema_changed"
    tool_id: str
    server: str
    old_hash: str
    new_hash: str | None
    at: float  # Unix time of the sync that saw it

    def encode(self) -> bytes:
        """JSON for PUBLISH."""
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def decode(cls, raw: bytes | str) -> ToolSchemaChanged:
        """Parse a published event; raises ValueError when malformed."""
        return cls.model_validate(orjson.loads(raw))
