"""How REST answers with an execution: 200 once it ended, 202 while it is queued or running."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from shared.executions.models import view_from_row
from shared.executions.status import TERMINAL


def execution_response(row: dict[str, Any]) -> JSONResponse:
    """The execution's view; 200 when terminal, else 202 (the client polls or waits)."""
    view = view_from_row(row)
    return JSONResponse(
        view.model_dump(mode="json"), status_code=200 if view.status in TERMINAL else 202
    )
