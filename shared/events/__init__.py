"""A tenant's live events (``GET /v1/events``)."""
