"""How REST answers with an execution: 200 once it ended, 202 while it is queued or running."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from shared.executions.models import view_from_row
from shared.executions.status import TERMINAL


def execution_response(row: dict[str, Any]) -> Response:
    """The execution's view; 200 when terminal, else 202 (the client polls or waits).

    Encoded by pydantic-core straight to JSON: the bytes `JSONResponse` makes of
    ``model_dump(mode="json")``, in a quarter of the time (a dict, then `json.dumps`)."""
    view = view_from_row(row)
    return Response(
        view.model_dump_json(),
        status_code=200 if view.status in TERMINAL else 202,
        media_type="application/json",
    )
